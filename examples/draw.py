# A multimodal agent method: the image and comment go to the AI.
topic = "sunrise over the sea"
print(f"drawing {topic!r}")
generate_image_and_comment(topic)

//! `imagegen`: a multimodal agent method that draws a PNG inside the guest,
//! seeded by the topic, and returns it with a comment.

use sandwit_sdk::{ContentPart, Error, Media, multimodal_agent};

/// The image's width and height in pixels.
const SIZE: u32 = 128;

/// FNV-1a: a stable seed from the topic.
fn seed(topic: &str) -> u64 {
    topic.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Draws an interference pattern of three waves whose frequencies and colours
/// come from the seed; returns RGB rows.
fn draw(seed: u64) -> Vec<u8> {
    let f = |shift: u32| 0.02 + ((seed >> shift) & 0xff) as f32 / 255.0 * 0.12;
    let (fx, fy, fr) = (f(0), f(8), f(16));
    let hue = ((seed >> 24) & 0xff) as f32 / 255.0 * std::f32::consts::TAU;
    let mut rgb = Vec::with_capacity((SIZE * SIZE * 3) as usize);
    let c = SIZE as f32 / 2.0;
    for y in 0..SIZE {
        for x in 0..SIZE {
            let (xf, yf) = (x as f32, y as f32);
            let r = ((xf - c).powi(2) + (yf - c).powi(2)).sqrt();
            let v = (xf * fx).sin() + (yf * fy).sin() + (r * fr).sin();
            let t = v / 3.0 * std::f32::consts::PI + hue;
            for phase in [0.0, 2.094, 4.189] {
                rgb.push((((t + phase).sin() * 0.5 + 0.5) * 255.0) as u8);
            }
        }
    }
    rgb
}

fn encode_png(rgb: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, SIZE, SIZE);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(Error::failed)?;
    writer.write_image_data(rgb).map_err(Error::failed)?;
    writer.finish().map_err(Error::failed)?;
    Ok(out)
}

/// Generate an abstract image for a topic and comment on it.
///
/// The script stops at this call: the image and the comment go to the AI,
/// which answers in a new round. The same topic always gives the same image.
///
/// Args:
///     topic: What the image is about (1 to 200 characters).
///
/// Returns:
///     A text comment and a 128x128 PNG image.
///
/// Example:
///     >>> generate_image_and_comment("sunrise over the sea")
#[multimodal_agent]
fn generate_image_and_comment(topic: String) -> Result<Vec<ContentPart>, Error> {
    let topic = topic.trim();
    if topic.is_empty() || topic.chars().count() > 200 {
        return Err(Error::invalid_arguments(
            "the topic must have 1 to 200 characters",
        ));
    }
    let seed = seed(topic);
    let png = encode_png(&draw(seed))?;
    let comment = format!(
        "Here is a {SIZE}x{SIZE} abstract image for \"{topic}\": three interfering waves, \
         pattern #{:08x}.",
        seed as u32
    );
    Ok(vec![
        ContentPart::Text(comment),
        ContentPart::Image(Media {
            mime_type: "image/png".into(),
            data: png,
        }),
    ])
}

sandwit_sdk::plugin! {
    id: "imagegen",
    name: "Image generator",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Draws abstract images for a topic and comments on them.",
    methods: [generate_image_and_comment],
}

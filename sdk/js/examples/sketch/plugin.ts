// Bar charts for the AI to look at, the TypeScript twin of the Rust
// `imagegen` example: a multimodal agent that draws the numbers it is given
// as a PNG and hands it, with a caption, to the AI; and a tool that posts
// the chart to the chat instead.

import { Image, Plugin, PluginError, type Ctx } from 'sandwit-plugin';
import { png } from './png.ts';

export const plugin = new Plugin({
  id: 'sketch',
  name: 'Sketch',
  version: '0.1.0',
  author: 'sandwit',
  description: 'Draws bar charts as images.',
});

/** The arguments of `sketch_bars` and `post_bars`. */
export interface BarsArgs {
  /**
   * The bars' heights, 1 to 32 numbers; negative ones are drawn as 0.
   * @minItems 1
   * @maxItems 32
   */
  values: number[];
  /** A caption for the chart. */
  title?: string;
}

const WIDTH = 192;
const HEIGHT = 120;
/** Index 0 the background, 1 the bars. */
const PALETTE = [
  [255, 255, 255],
  [37, 99, 235],
];

/** The chart as palette indices, rows top first: each bar's columns filled
 * from its top down (typed-array fills: the engine runs no JIT in a
 * component, so per-pixel loops would cost the most). */
function draw(values: number[]): Uint8Array {
  const max = Math.max(...values, 1e-9);
  const pixels = new Uint8Array(WIDTH * HEIGHT);
  const slot = Math.floor(WIDTH / values.length);
  values.forEach((value, i) => {
    const top = HEIGHT - Math.round((Math.max(value, 0) / max) * (HEIGHT - 8));
    const left = i * slot + 2;
    const right = (i + 1) * slot - 2;
    for (let y = top; y < HEIGHT; y++) pixels.fill(1, y * WIDTH + left, y * WIDTH + right);
  });
  return pixels;
}

function chart({ values, title }: BarsArgs): { image: Image; caption: string } {
  if (values.some((v) => !Number.isFinite(v))) throw new PluginError('every value must be a finite number', 'invalid-arguments');
  const caption = `${title ?? 'Bars'}: ${values.length} values, the largest ${Math.max(...values)}.`;
  return { image: new Image(png(WIDTH, HEIGHT, draw(values), PALETTE), 'image/png'), caption };
}

plugin.multimodalAgent<BarsArgs>(
  { name: 'sketch_bars', description: 'Draw numbers as a bar chart and look at it.', params: 'BarsArgs' },
  (_ctx: Ctx, args) => {
    const { image, caption } = chart(args);
    return [caption, image];
  },
);

plugin.tool<BarsArgs, string>(
  { name: 'post_bars', description: 'Draw numbers as a bar chart and post it to the chat.', params: 'BarsArgs', returns: { type: 'string' } },
  (ctx: Ctx, args) => {
    const { image, caption } = chart(args);
    ctx.chat.sendImage(image);
    return caption;
  },
);

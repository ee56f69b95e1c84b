// `{{id}}`: a sandwit plugin in TypeScript.
//
// Build it with `sandwit plugin build` (which type-checks it); test it with
// `npm test` (the first build installs the pinned tools and links the SDK
// into node_modules).

import { Plugin, type Ctx } from 'sandwit-plugin';

export const plugin = new Plugin({
  id: '{{id}}',
  name: '{{id}}',
  version: '0.1.0',
  author: 'you',
  description: 'Greets people.',
});

/** The arguments of `greet`: the build turns this type, and its doc
 * comments, into the JSON Schema the AI reads and the host checks. */
export interface GreetArgs {
  /** Who to greet. */
  name: string;
  /** How many times to say hello. */
  times?: number;
}

plugin.tool<GreetArgs, string>(
  { name: 'greet', description: 'Greet someone by name.', params: 'GreetArgs', returns: { type: 'string' } },
  (_ctx: Ctx, { name, times = 1 }) => `${'Hello, '.repeat(times)}${name}!`,
);

// `{{id}}`: a sandwit plugin in JavaScript.
//
// Build it with `sandwit plugin build`; test it with `npm test` (the first
// build installs the pinned tools and links the SDK into node_modules).

import { Plugin } from 'sandwit-plugin';

export const plugin = new Plugin({
  id: '{{id}}',
  name: '{{id}}',
  version: '0.1.0',
  author: 'you',
  description: 'Greets people.',
});

plugin.tool(
  {
    name: 'greet',
    // The description and the parameters' schemas are what the AI reads.
    description: 'Greet someone by name.',
    params: {
      type: 'object',
      properties: { name: { type: 'string', description: 'Who to greet.' } },
      required: ['name'],
    },
    returns: { type: 'string', description: 'The greeting.' },
  },
  (ctx, { name }) => `Hello, ${name}!`,
);

// The JSON Schemas of the TypeScript types a plugin's entry module exports,
// for methods that name their parameters' type (`params: 'GreetArgs'`).
// `sandwit plugin build` runs it with Node:
//
//   node schemas.cjs TOOLS_NODE_MODULES ENTRY.ts OUT.json
//
// Each exported interface or type alias (without type parameters) is given
// to ts-json-schema-generator alone: its whole-file mode also walks the
// module's functions, and fails on some of them. Properties keep their
// declaration order, which is the methods' positional order.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const [modules, entry, out] = process.argv.slice(2);
const load = (name) => require(require.resolve(name, { paths: [modules] }));
const ts = load('typescript');
const { createGenerator } = load('ts-json-schema-generator');

const text = fs.readFileSync(entry, 'utf8');
const source = ts.createSourceFile(entry, text, ts.ScriptTarget.Latest, true);
const exported = (node) => (node.modifiers ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
const names = source.statements
  .filter((s) => (ts.isInterfaceDeclaration(s) || ts.isTypeAliasDeclaration(s)) && exported(s) && !s.typeParameters)
  .map((s) => s.name.text);

const definitions = {};
if (names.length) {
  const generator = createGenerator({
    path: path.resolve(entry),
    expose: 'export',
    jsDoc: 'extended',
    skipTypeCheck: true,
    sortProps: false,
    topRef: true,
  });
  for (const name of names) {
    let schema;
    try {
      schema = generator.createSchema(name);
    } catch (e) {
      const where = e.node ? ` (${path.basename(entry)}, ${e.node.getSourceFile?.().getLineAndCharacterOfPosition(e.node.getStart()).line + 1 || '?'})` : '';
      process.stderr.write(`the type ${name}${where} has no JSON Schema: ${String(e.message).split('\n')[0]}\n`);
      process.exit(1);
    }
    Object.assign(definitions, schema.definitions);
  }
}
fs.writeFileSync(out, JSON.stringify({ definitions }));

/**
 * The TypeScript programs of the tests that type-check the client package's surface (its entry's
 * exports, its SDK client types, the docs' code blocks): strict, ES2022, NodeNext modules, no
 * output, as a caller's project compiles them.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Options that add Node's own types (`@types/node` of this repository) to a program. */
export const NODE_TYPES: ts.CompilerOptions = {
  types: ['node'],
  typeRoots: [join(root, 'node_modules/@types')],
};

/** A strict ESM program of `files`; `extra` options are added to (or replace) the common ones. */
export function strictProgram(files: readonly string[], extra: ts.CompilerOptions = {}): ts.Program {
  return ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    ...extra,
  });
}

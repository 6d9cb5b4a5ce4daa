/**
 * The `.lua` files of this folder inside a bundle: esbuild resolves `#lua-files` here under the
 * `paceline-bundle` condition and, with the `.lua` text loader, turns the `require` below into a
 * table of every `.lua` file of the folder, each as its text (esbuild's glob-style require). Only
 * bundles load this module; from the repository the registry reads the files from disk (files.ts).
 * Every bundler of the repository sets both options from bundling.ts: packages/client/scripts/build.ts,
 * local/worker/bundle.ts, cdk/constructs/paceline-function.ts.
 */

/** The text of `name` (a file of this folder, e.g. `spend-lease.lua`). */
export function luaFile(name: string): string {
  const stem = name.replace(/\.lua$/, '');
  // The template literal is what esbuild expands into every `.lua` file of this folder.
  return require(`./${stem}.lua`) as string;
}

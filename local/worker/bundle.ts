/**
 * esbuild bundles of function handlers (and of the worker entry) for the process-per-instance
 * runtime, the way the CDK ships them to Lambda. A cold start then loads one JavaScript file with
 * plain `node` instead of compiling TypeScript through `tsx`: about half the CPU per cold start,
 * which matters when 72 pacer instances start together on a 2-core machine.
 *
 * Bundles live in `.local/bundles/` and are rebuilt only when one of their inputs changed (the
 * esbuild metafile's inputs, compared by mtime; the Lua scripts are inputs too); writes are atomic (temp file + rename) so two
 * runners building at once cannot load half a file. A handler that cannot be bundled (e.g. not
 * written yet) is reported, and the caller runs it through `tsx` so the error appears at invoke
 * time exactly as without bundling.
 */
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { build } from 'esbuild';
import { LUA_BUNDLE_CONDITIONS, LUA_BUNDLE_LOADER } from '../../shared/redis/scripts/bundling.js';

/** Where bundles go. */
export function bundleDir(repoRoot: string): string {
  return join(repoRoot, '.local', 'bundles');
}

interface Meta {
  readonly inputs: Record<string, number>;
}

function upToDate(out: string, metaFile: string, repoRoot: string): boolean {
  try {
    statSync(out);
    const meta = JSON.parse(readFileSync(metaFile, 'utf8')) as Meta;
    for (const [input, mtime] of Object.entries(meta.inputs)) {
      if (statSync(resolve(repoRoot, input)).mtimeMs !== mtime) return false;
    }
    return true;
  } catch {
    return false;
  }
}

function atomicWrite(file: string, contents: string | Uint8Array): void {
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file);
}

/** Options of {@link bundleModule}. */
export interface BundleOptions {
  /**
   * Keep function and class names (esbuild `keepNames`): class names are Lambda's `errorType`.
   * It costs a `defineProperty` on every function object created (closures included), so the
   * simulator's bundle goes without it (its errors set `name` themselves). @default true
   */
  readonly keepNames?: boolean;
}

/**
 * Bundles `entry` (absolute, or relative to the repository root) into an ESM file under
 * `.local/bundles/`, reusing an up-to-date bundle. Returns the bundle's path; throws esbuild's
 * error when the entry cannot be bundled.
 */
export async function bundleModule(
  entry: string,
  repoRoot: string,
  options: BundleOptions = {},
): Promise<string> {
  const keepNames = options.keepNames ?? true;
  const absolute = resolve(repoRoot, entry);
  const name =
    relative(repoRoot, absolute)
      .replace(/[/\\]/g, '__')
      .replace(/\.[cm]?[jt]s$/, '') + (keepNames ? '' : '.nonames');
  const dir = bundleDir(repoRoot);
  const out = join(dir, `${name}.mjs`);
  const metaFile = join(dir, `${name}.meta.json`);
  if (upToDate(out, metaFile, repoRoot)) return out;
  const result = await build({
    entryPoints: [absolute],
    absWorkingDir: repoRoot,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    metafile: true,
    logLevel: 'silent',
    // Smaller to parse, but class names stay (unless asked otherwise): they are Lambda's `errorType`.
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames,
    // The Lua scripts go inside the bundle as text (shared/redis/scripts/bundling.ts).
    conditions: [...LUA_BUNDLE_CONDITIONS],
    loader: { ...LUA_BUNDLE_LOADER },
    // CommonJS dependencies (ioredis…) need `require` inside an ESM bundle.
    banner: {
      js: "import { createRequire as __plCreateRequire } from 'node:module';const require = __plCreateRequire(import.meta.url);",
    },
    outfile: out,
  });
  mkdirSync(dirname(out), { recursive: true });
  const file = result.outputFiles.find((f) => basename(f.path) === basename(out));
  if (!file) throw new Error(`esbuild produced no ${basename(out)} for ${entry}`);
  const inputs: Record<string, number> = {};
  for (const input of Object.keys(result.metafile.inputs)) {
    inputs[input] = statSync(resolve(repoRoot, input)).mtimeMs;
  }
  atomicWrite(out, file.contents);
  atomicWrite(metaFile, JSON.stringify({ inputs } satisfies Meta));
  return out;
}

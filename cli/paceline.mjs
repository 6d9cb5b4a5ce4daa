#!/usr/bin/env node
// `npx paceline …`: registers tsx (from this package) and runs the TypeScript CLI.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('./paceline.ts');
const code = await main(process.argv.slice(2), {
  out: (line) => console.log(line),
  err: (line) => console.error(line),
  env: process.env,
  now: () => Date.now(),
});
process.exit(code);

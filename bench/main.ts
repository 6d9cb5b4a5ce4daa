/**
 * `npm run bench -- <name>`: runs one benchmark against real redis-server (and emulators where
 * the benchmark needs them) and prints a final JSON line. Every benchmark reports the raw-Redis
 * ceiling measured in the same run (bench/ceiling.ts) beside its own figures.
 */
const benchmarks: Record<string, () => Promise<{ run(args: string[]): Promise<Record<string, unknown>> }>> = {
  counting: () => import('./counting.js'),
  spend: () => import('./spend.js'),
  pacer: () => import('./pacer.js'),
  sim: () => import('./sim.js'),
};

const [name, ...args] = process.argv.slice(2);
const load = name ? benchmarks[name] : undefined;
if (!load) {
  console.error(`usage: npm run bench -- <${Object.keys(benchmarks).join('|')}> [options]`);
  process.exit(2);
}
const result = await (await load()).run(args);
console.log(JSON.stringify({ benchmark: name, at: new Date().toISOString(), ...result }));
process.exit(0);

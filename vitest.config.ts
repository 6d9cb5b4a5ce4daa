import { defineConfig } from 'vitest/config';

/**
 * Five projects, each run as its own step:
 * - unit: pure logic, no network, no child processes;
 * - integration: real redis-server, dynalite, kinesalite and the local SSM endpoint,
 *   each test file starting the servers it needs on free loopback ports;
 * - soak: multi-process, time-compressed and simulated-day tests (`*.soak.test.ts`), one file at
 *   a time after the integration tests;
 * - quality: the market simulator's pacing-quality runs (`*.quality.test.ts`), outside `npm test`;
 * - synth: the CDK app synthesized once per file (esbuild bundling costs seconds).
 * `npm test` runs unit, integration, soak and synth (package.json); `npm run test:quality` runs quality.
 */
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], environment: 'node' } },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: ['test/integration/**/*.soak.test.ts', 'test/integration/**/*.quality.test.ts'],
          environment: 'node',
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Two cores: servers + test bodies compete for CPU; keep files from starving each other.
          maxWorkers: 2,
        },
      },
      {
        // Real-time simulations with several OS processes (e.g. the overshoot test's bidders):
        // they measure behaviour under a time-compressed day, so they run alone, one file at a
        // time, after the other integration tests, never competing with them for the 2 cores.
        // Also the simulated pacing days (test/integration/pacing): deterministic, but each keeps
        // a core busy for minutes, which starves timing-sensitive integration tests beside it.
        test: {
          name: 'soak',
          include: ['test/integration/**/*.soak.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        // The simulator's pacing-quality runs: each shipped scenario's days against the acceptance
        // bounds (test/integration/sim/quality.ts), several minutes of CPU per strategy. Not part
        // of `npm test` (hours on the 2-core machine, results in docs/pacing-quality.md); run with
        // `npm run test:quality`.
        test: {
          name: 'quality',
          include: ['test/integration/**/*.quality.test.ts'],
          environment: 'node',
          testTimeout: 3_600_000,
          hookTimeout: 3_600_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'synth',
          include: ['test/synth/**/*.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});

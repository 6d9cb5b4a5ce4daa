/**
 * A TCP proxy that delays every chunk by a random 0–`maxDelayMs` ms (order kept per direction),
 * run in a worker thread so its delays are real time, not turns of the test's event loop. Used to
 * give a run the timing of another host: replies land in other chunks, at other points of the
 * caller's awaits, than on a direct connection. With `bytesPerSec`, the server's replies trickle
 * at that rate (a slice every 20 ms): a long read that makes steady progress.
 */
import { Worker } from 'node:worker_threads';

/** A running proxy: connect to `port` on 127.0.0.1. */
export interface LatencyProxy {
  readonly port: number;
  stop(): Promise<void>;
}

// The worker's code (plain JavaScript, evaluated by the Worker: no build step).
const WORKER = `
const net = require('node:net');
const { parentPort, workerData } = require('node:worker_threads');
const { targetPort, maxDelayMs, seed, bytesPerSec } = workerData;
let state = seed >>> 0 || 1;
const random = () => {
  // xorshift32: a fixed sequence of delays for a seed.
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state / 4294967296;
};
/** Forwards chunks from one socket to another, each after its delay, in order (one queue and one timer per direction). */
const pipe = (from, to, rate) => {
  const queue = [];
  let timer = null;
  let last = 0;
  let ended = false;
  const drain = () => {
    timer = null;
    const now = Date.now();
    while (queue.length > 0 && queue[0].due <= now) {
      const { chunk } = queue.shift();
      if (!to.destroyed) to.write(chunk);
    }
    if (queue.length > 0) timer = setTimeout(drain, queue[0].due - now);
    else if (ended) to.destroy();
  };
  from.on('data', (chunk) => {
    if (rate > 0) {
      // Slices of 20 ms worth of bytes, one every 20 ms after the previous one.
      const slice = Math.max(1, Math.floor(rate / 50));
      for (let at = 0; at < chunk.length; at += slice) {
        last = Math.max(last + 20, Date.now());
        queue.push({ due: last, chunk: chunk.subarray(at, at + slice) });
      }
    } else {
      last = Math.max(last, Date.now() + random() * maxDelayMs);
      queue.push({ due: last, chunk });
    }
    if (timer === null) timer = setTimeout(drain, Math.max(0, queue[0].due - Date.now()));
  });
  from.on('close', () => {
    ended = true;
    if (timer === null) drain();
  });
  from.on('error', () => to.destroy());
};
const server = net.createServer((client) => {
  client.setNoDelay(true);
  const upstream = net.connect(targetPort, '127.0.0.1');
  upstream.setNoDelay(true);
  pipe(client, upstream, 0);
  pipe(upstream, client, bytesPerSec);
});
server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
`;

/**
 * Starts a proxy to 127.0.0.1:`targetPort`; with `bytesPerSec` > 0 the server's bytes trickle at
 * that rate instead of being delayed at random.
 */
export async function startLatencyProxy(
  targetPort: number,
  maxDelayMs = 2,
  seed = 1,
  bytesPerSec = 0,
): Promise<LatencyProxy> {
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { targetPort, maxDelayMs, seed, bytesPerSec },
  });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', (p: number) => resolve(p));
    worker.once('error', reject);
  });
  return {
    port,
    // Ends the thread: its server and every proxied socket close with it.
    async stop() {
      await worker.terminate();
    },
  };
}

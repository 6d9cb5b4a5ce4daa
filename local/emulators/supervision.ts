import { Server } from 'node:http';

/**
 * What the local runtime's supervisors report about the emulators they keep alive: a server
 * that died, its restart on the same port, or a restart that failed (retried with backoff). The
 * runner prints each as one line naming what died and what happens next.
 */

/** One supervision event of an emulator (a `redis-server` process or an in-process server). */
export type SupervisionEvent =
  | {
      readonly type: 'died';
      /** e.g. `redis-server (pid 4242)` or `dynalite`. */
      readonly component: string;
      /** `127.0.0.1:port` */
      readonly address: string;
      /** e.g. `signal SIGKILL`, `exit status 1`, `server closed`. */
      readonly reason: string;
    }
  | {
      readonly type: 'restarted';
      readonly component: string;
      readonly address: string;
      /** What state it came back with (empty, replayed from its append-only file, intact). */
      readonly state: string;
    }
  | {
      readonly type: 'restart-failed';
      readonly component: string;
      readonly address: string;
      readonly error: string;
      readonly retryInMs: number;
    };

/** Receives supervision events. */
export type SupervisionListener = (event: SupervisionEvent) => void;

/** Backoff of a server that keeps dying: immediate first, then growing up to 30 s. */
export const RESTART_BACKOFF_MS: readonly number[] = [0, 1_000, 2_000, 5_000, 10_000, 30_000];

/** Backoff before restart attempt `attempt` (0 = the first). */
export function restartDelayMs(attempt: number): number {
  return RESTART_BACKOFF_MS[Math.min(attempt, RESTART_BACKOFF_MS.length - 1)] as number;
}

/** One console line for an event, prefixed with the region. */
export function formatSupervisionEvent(region: string, event: SupervisionEvent): string {
  switch (event.type) {
    case 'died':
      return `[${region}] !! ${event.component} at ${event.address} died (${event.reason}); restarting it on the same port`;
    case 'restarted':
      return `[${region}] ${event.component} at ${event.address} restarted: ${event.state}`;
    case 'restart-failed':
      return `[${region}] !! ${event.component} at ${event.address} could not be restarted (${event.error}); retrying in ${event.retryInMs / 1000} s`;
  }
}

/** Controls a supervised in-process server (see {@link superviseHttpServer}). */
export interface ServerSupervision {
  /** Marks the next closes as intended (stop, suspend) or not (after resume). */
  setIntended(intended: boolean): void;
}

/**
 * Supervises an in-process http server: when it stops listening without being asked to, reports
 * it and listens again on the same port (with backoff while that fails). Its data lives in this
 * process or on disk, so it comes back intact. Uses the plain `http.Server` methods: dynalite
 * wraps `close()`/`listen()` to close and recreate its store, which must not happen here.
 */
export function superviseHttpServer(
  server: Server,
  options: { readonly component: string; readonly port: number; readonly onEvent?: SupervisionListener },
): ServerSupervision {
  const { component, port } = options;
  const address = `127.0.0.1:${port}`;
  const report = options.onEvent ?? (() => {});
  let intended = false;
  const relisten = (attempt: number) => {
    setTimeout(() => {
      if (intended) return;
      const onError = (error: Error) => {
        report({
          type: 'restart-failed',
          component,
          address,
          error: error.message,
          retryInMs: restartDelayMs(attempt + 1),
        });
        relisten(attempt + 1);
      };
      server.once('error', onError);
      Server.prototype.listen.call(server, { port, host: '127.0.0.1' }, () => {
        server.off('error', onError);
        report({ type: 'restarted', component, address, state: 'listening again, data intact' });
      });
    }, restartDelayMs(attempt)).unref();
  };
  server.on('close', () => {
    if (intended) return;
    report({ type: 'died', component, address, reason: 'server stopped listening' });
    relisten(0);
  });
  return {
    setIntended(value) {
      intended = value;
    },
  };
}

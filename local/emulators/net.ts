import net from 'node:net';
import { PacelineError } from '../../shared/errors.js';

/** Asks the OS for a free loopback port (redis-server's `--port 0` disables TCP instead). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not allocate a port'));
      });
    });
  });
}

/**
 * A free loopback port for a Redis cluster node: the node also binds its cluster bus on
 * port + 10000, so that port must be free (and exist) too, or the node exits at start.
 */
export async function freeClusterPort(attempts = 50): Promise<number> {
  for (let i = 0; i < attempts; i++) {
    const port = await freePort();
    if (port + 10_000 > 65_535) continue;
    try {
      await assertPortsFree([port, port + 10_000]);
      return port;
    } catch (error) {
      if (!(error instanceof PortInUseError)) throw error;
    }
  }
  throw new Error(`no free port pair (port, port + 10000) found in ${attempts} attempts`);
}

/** Throws {@link PortInUseError} for the first of `ports` that cannot be bound on loopback. */
export async function assertPortsFree(ports: readonly number[]): Promise<void> {
  for (const port of ports) {
    await new Promise<void>((resolve, reject) => {
      const server = net.createServer();
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'EADDRINUSE' ? new PortInUseError(port, { cause: error }) : error),
      );
      server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
    });
  }
}

/** Raised when a fixed port is taken; says what to do. */
export class PortInUseError extends PacelineError {
  override readonly name = 'PortInUseError';
  override readonly code = 'local.port-in-use';
  constructor(
    readonly port: number,
    options?: { cause?: unknown },
  ) {
    super(
      `port ${port} is in use (another \`npm start\`?): stop it, or choose other ports with --base-port N (--base-port 0 for free ports)`,
      options,
    );
  }
}

/** Starts an http server on a loopback port (a free one by default); returns its base URL. */
export async function listenLoopback(
  server: import('node:http').Server,
  port = 0,
): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) =>
      reject(error.code === 'EADDRINUSE' ? new PortInUseError(port, { cause: error }) : error);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address();
  if (!address || typeof address !== 'object') throw new Error('server has no address');
  return { url: `http://127.0.0.1:${address.port}`, port: address.port };
}

/** Closes an http server, dropping keep-alive sockets so close does not hang. */
export async function closeServer(server: import('node:http').Server): Promise<void> {
  server.closeAllConnections?.();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

import net from 'node:net';

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

/** Starts an http server on a free loopback port; returns its base URL. */
export async function listenLoopback(
  server: import('node:http').Server,
): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
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

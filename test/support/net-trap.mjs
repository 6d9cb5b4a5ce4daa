// Preloaded into a child process (`NODE_OPTIONS=--import <this file>`): records every TCP
// connection the process opens — HTTP(S) of the AWS SDK, Redis, anything built on net.Socket —
// to the JSON-lines file NET_TRAP_LOG, and refuses every one to a host that is not loopback (the
// socket fails with ECONNREFUSED, nothing leaves the machine). A command that fell back to an
// SDK default endpoint (dynamodb.us-east-1.amazonaws.com…) or a credential endpoint (IMDS, STS)
// shows up here whatever variable or config file sent it there.
import { appendFileSync } from 'node:fs';
import net from 'node:net';

const log = process.env.NET_TRAP_LOG;
const loopback = (host) => {
  const h = String(host)
    .replace(/^\[|\]$/g, '')
    .toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
};

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function trappedConnect(...args) {
  let options = args[0];
  if (Array.isArray(options)) options = options[0]; // net's internal normalized form
  if (typeof options !== 'object' || options === null) {
    options =
      typeof args[0] === 'string' && Number.isNaN(Number(args[0]))
        ? { path: args[0] }
        : { port: args[0], host: typeof args[1] === 'string' ? args[1] : undefined };
  }
  if (options.path) return connect.apply(this, args); // a Unix socket or pipe (what net itself checks)
  const host = options.host ?? 'localhost';
  const allowed = loopback(host);
  if (log) {
    appendFileSync(
      log,
      `${JSON.stringify({ pid: process.pid, host, port: Number(options.port), allowed })}\n`,
    );
  }
  if (allowed) return connect.apply(this, args);
  const error = Object.assign(
    new Error(`net-trap: connection to ${host}:${options.port} refused (not loopback)`),
    {
      code: 'ECONNREFUSED',
      errno: -111,
      syscall: 'connect',
      address: host,
      port: options.port,
    },
  );
  process.nextTick(() => this.destroy(error));
  return this;
};

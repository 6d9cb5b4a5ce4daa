/**
 * The raw connections of one user of the layer (a reader, the script caller), one per node,
 * opened lazily and replaced when broken; closed with the application's client.
 */
import type { RedisClient } from '../connect.js';
import { RespConnection, type RespConnectionOptions } from './connection.js';

/** One {@link RespConnection} per node for one client (see the module comment). */
export class RespNodes {
  private readonly connections = new Map<string, RespConnection>();
  private closed = false;
  /** Closes the sockets with the client; registered while sockets are open. */
  private readonly onClientEnd = () => this.close();
  private listening = false;

  constructor(
    private readonly client: RedisClient,
    private readonly options: RespConnectionOptions,
  ) {}

  /** Closed: calls go through ioredis from now on. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** The open connection to `node`, a new one when there is none or it broke. */
  connection(node: string): RespConnection {
    let c = this.connections.get(node);
    if (c === undefined || c.broken) {
      c = new RespConnection(this.client, node, this.options);
      this.connections.set(node, c);
      // The listener goes with the sockets on close, so short-lived users (a pacer process per
      // takeover in the simulator) do not pile up on the client.
      if (!this.listening) {
        this.client.once('end', this.onClientEnd);
        this.listening = true;
      }
    }
    return c;
  }

  /** Drops the connections; the next call opens new ones. */
  reconnect(): void {
    for (const c of this.connections.values()) c.close();
    this.connections.clear();
    // No socket open: nothing to close with the client (the next connection registers again).
    if (this.listening) {
      this.client.off('end', this.onClientEnd);
      this.listening = false;
    }
  }

  /** Closes the connections for good (calls after this go through ioredis). */
  close(): void {
    this.closed = true;
    this.reconnect();
  }
}

// dynalite and kinesalite ship no types; they return a node:http(s) Server.
declare module 'dynalite' {
  import type { Server } from 'node:http';

  interface DynaliteOptions {
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    path?: string;
  }
  export default function dynalite(options?: DynaliteOptions): Server;
}
declare module 'kinesalite' {
  import type { Server } from 'node:http';

  interface KinesaliteOptions {
    createStreamMs?: number;
    deleteStreamMs?: number;
    updateStreamMs?: number;
    shardLimit?: number;
    path?: string;
  }
  export default function kinesalite(options?: KinesaliteOptions): Server;
}

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
// s3rver ships no types; the part Paceline uses.
declare module 's3rver' {
  interface S3rverOptions {
    address?: string;
    port?: number;
    directory: string;
    silent?: boolean;
    resetOnClose?: boolean;
    configureBuckets?: { name: string }[];
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
    /** Set by run(). */
    httpServer?: import('node:http').Server;
  }
}

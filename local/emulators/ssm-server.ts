/**
 * A local SSM Parameter Store endpoint speaking the AWS JSON 1.1 protocol, so
 * `@aws-sdk/client-ssm` is used unchanged (no npm package emulates SSM). It dispatches on the
 * `x-amz-target: AmazonSSM.<Operation>` header and implements what Paceline uses: PutParameter
 * (Overwrite, versions), GetParameter, GetParameters, GetParametersByPath (Recursive, paging),
 * DeleteParameter; errors carry `__type` and `x-amzn-errortype` as AWS sends them.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname } from 'node:path';
import type { Clock } from '../../shared/time/clock.js';
import { systemClock } from '../../shared/time/clock.js';
import { closeServer, listenLoopback } from './net.js';
import { type SupervisionListener, superviseHttpServer } from './supervision.js';

interface StoredParameter {
  name: string;
  type: 'String' | 'StringList' | 'SecureString';
  value: string;
  version: number;
  lastModified: number;
}

class SsmError extends Error {
  constructor(
    readonly type: string,
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

/** Options of {@link startSsmServer}. */
export interface SsmServerOptions {
  readonly region?: string;
  readonly clock?: Clock;
  /** Refuse every request with a 503 while true (fault injection: "SSM unreachable"). */
  readonly unavailable?: () => boolean;
  /** Loopback port. @default a free port */
  readonly port?: number;
  /**
   * JSON file keeping the parameters across restarts (rewritten after every change, loaded at
   * start). @default in memory
   */
  readonly file?: string;
  /** Supervision reports (died, restarted). @default none */
  readonly onEvent?: SupervisionListener;
  /** Wraps the server's request handling before it listens (the local IAM gate). @default none */
  readonly guard?: (server: Server) => void;
}

/** A running local SSM endpoint. */
export interface RunningSsm {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
  /** Fault injection: stops listening as if crashed; the supervisor listens again. */
  crash(): void;
}

const MAX_PAGE = 10;

/** In-memory parameter store with SSM's semantics; exported for unit tests. */
export class ParameterStore {
  private readonly params = new Map<string, StoredParameter>();
  constructor(
    private readonly region = 'us-east-1',
    private readonly clock: Clock = systemClock,
    /** JSON file the parameters are kept in (loaded now, rewritten on every change). @default none */
    private readonly file?: string,
  ) {
    if (file && existsSync(file)) {
      for (const p of JSON.parse(readFileSync(file, 'utf8')) as StoredParameter[]) this.params.set(p.name, p);
    }
  }

  /** Writes the file whole, through a rename, so a crash never leaves half a file. */
  private save(): void {
    if (!this.file) return;
    mkdirSync(dirname(this.file), { recursive: true });
    writeFileSync(`${this.file}.tmp`, JSON.stringify([...this.params.values()]));
    renameSync(`${this.file}.tmp`, this.file);
  }

  dispatch(operation: string, input: Record<string, unknown>): unknown {
    switch (operation) {
      case 'PutParameter': {
        const out = this.put(input);
        this.save();
        return out;
      }
      case 'GetParameter':
        return { Parameter: this.render(this.mustGet(str(input, 'Name'))) };
      case 'GetParameters':
        return this.getMany(input);
      case 'GetParametersByPath':
        return this.byPath(input);
      case 'DeleteParameter':
        this.mustGet(str(input, 'Name'));
        this.params.delete(normalize(str(input, 'Name')));
        this.save();
        return {};
      default:
        throw new SsmError(
          'UnknownOperationException',
          `Operation ${operation} is not implemented by the local SSM endpoint`,
        );
    }
  }

  private put(input: Record<string, unknown>): unknown {
    const name = normalize(str(input, 'Name'));
    const value = str(input, 'Value');
    if (value.length === 0) throw new SsmError('ValidationException', 'Parameter value must not be empty');
    if (value.length > 4096)
      throw new SsmError('ParameterMaxVersionLimitExceeded', 'Standard parameters hold at most 4 KB');
    const existing = this.params.get(name);
    if (existing && input.Overwrite !== true) {
      throw new SsmError(
        'ParameterAlreadyExists',
        `The parameter ${name} already exists. To overwrite it, set Overwrite to true.`,
      );
    }
    const type = (input.Type as StoredParameter['type'] | undefined) ?? existing?.type ?? 'String';
    const stored: StoredParameter = {
      name,
      type,
      value,
      version: (existing?.version ?? 0) + 1,
      lastModified: this.clock.now(),
    };
    this.params.set(name, stored);
    return { Version: stored.version, Tier: 'Standard' };
  }

  private getMany(input: Record<string, unknown>): unknown {
    const names = input.Names;
    if (!Array.isArray(names) || names.length === 0 || names.length > 10) {
      throw new SsmError('ValidationException', 'Names must hold 1 to 10 parameter names');
    }
    const found: unknown[] = [];
    const invalid: string[] = [];
    for (const raw of names) {
      const p = this.params.get(normalize(String(raw)));
      if (p) found.push(this.render(p));
      else invalid.push(String(raw));
    }
    return { Parameters: found, InvalidParameters: invalid };
  }

  private byPath(input: Record<string, unknown>): unknown {
    const path = str(input, 'Path');
    if (!path.startsWith('/')) throw new SsmError('ValidationException', 'Path must begin with /');
    const prefix = path.endsWith('/') ? path : `${path}/`;
    const recursive = input.Recursive === true;
    const max = input.MaxResults === undefined ? MAX_PAGE : Number(input.MaxResults);
    if (!Number.isInteger(max) || max < 1 || max > MAX_PAGE) {
      throw new SsmError('ValidationException', `MaxResults must be between 1 and ${MAX_PAGE}`);
    }
    const matches = [...this.params.values()]
      .filter((p) => p.name.startsWith(prefix) && (recursive || !p.name.slice(prefix.length).includes('/')))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    let start = 0;
    if (typeof input.NextToken === 'string') {
      start = Number(Buffer.from(input.NextToken, 'base64url').toString());
      if (!Number.isInteger(start) || start < 0)
        throw new SsmError('ValidationException', 'Invalid NextToken');
    }
    const page = matches.slice(start, start + max);
    const next =
      start + max < matches.length ? Buffer.from(String(start + max)).toString('base64url') : undefined;
    return { Parameters: page.map((p) => this.render(p)), ...(next ? { NextToken: next } : {}) };
  }

  private mustGet(rawName: string): StoredParameter {
    const p = this.params.get(normalize(rawName));
    if (!p) throw new SsmError('ParameterNotFound', `Parameter ${rawName} not found.`);
    return p;
  }

  private render(p: StoredParameter): Record<string, unknown> {
    return {
      Name: p.name,
      Type: p.type,
      Value: p.value,
      Version: p.version,
      // JSON 1.1 timestamps are epoch seconds.
      LastModifiedDate: p.lastModified / 1000,
      ARN: `arn:aws:ssm:${this.region}:000000000000:parameter${p.name.startsWith('/') ? '' : '/'}${p.name}`,
      DataType: 'text',
    };
  }
}

function normalize(name: string): string {
  if (name.length === 0 || name.length > 2048) {
    throw new SsmError('ValidationException', 'Parameter name must be 1 to 2048 characters');
  }
  if (!/^[a-zA-Z0-9_.\-/]+$/.test(name)) {
    throw new SsmError('ValidationException', `Parameter name ${name} has characters SSM does not allow`);
  }
  return name;
}

function str(input: Record<string, unknown>, field: string): string {
  const value = input[field];
  if (typeof value !== 'string')
    throw new SsmError('ValidationException', `${field} is required and must be a string`);
  return value;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function send(res: ServerResponse, status: number, body: unknown, errorType?: string): void {
  const headers: Record<string, string> = { 'content-type': 'application/x-amz-json-1.1' };
  if (errorType) headers['x-amzn-errortype'] = errorType;
  res.writeHead(status, headers);
  res.end(JSON.stringify(body));
}

/** Starts the endpoint on a free loopback port. */
export async function startSsmServer(options: SsmServerOptions = {}): Promise<RunningSsm> {
  const store = new ParameterStore(options.region, options.clock, options.file);
  const server: Server = createServer(async (req, res) => {
    try {
      if (options.unavailable?.()) throw new SsmError('ServiceUnavailable', 'local SSM is switched off', 503);
      const target = String(req.headers['x-amz-target'] ?? '');
      if (req.method !== 'POST' || !target.startsWith('AmazonSSM.')) {
        throw new SsmError('UnknownOperationException', `Expected POST with x-amz-target AmazonSSM.<Op>`);
      }
      const body = await readBody(req);
      let input: Record<string, unknown>;
      try {
        input = body ? (JSON.parse(body) as Record<string, unknown>) : {};
      } catch {
        throw new SsmError('SerializationException', 'Request body is not JSON');
      }
      send(res, 200, store.dispatch(target.slice('AmazonSSM.'.length), input));
    } catch (error) {
      if (error instanceof SsmError) {
        send(res, error.status, { __type: error.type, message: error.message }, error.type);
      } else {
        send(res, 500, { __type: 'InternalServerError', message: String(error) }, 'InternalServerError');
      }
    }
  });
  options.guard?.(server);
  const { url, port } = await listenLoopback(server, options.port);
  const supervision = superviseHttpServer(server, {
    component: 'local SSM endpoint',
    port,
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
  });
  return {
    url,
    port,
    stop: () => {
      supervision.setIntended(true);
      return closeServer(server);
    },
    crash() {
      server.close();
      server.closeAllConnections();
    },
  };
}

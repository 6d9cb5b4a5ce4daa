/**
 * ElastiCache IAM authentication: the password a client sends with `AUTH <user> <password>` is a
 * SigV4-presigned `connect` request for the cache, signed with the caller's AWS credentials
 * (service `elasticache`, valid 15 minutes). A connection authenticated with a token stays
 * authenticated for up to 12 hours, after which ElastiCache closes it; every (re)connect needs a
 * token that is still valid, so {@link IamTokenRefresher} keeps a fresh one in the client's
 * options well before the old one expires (ioredis reads `password` on every connect).
 *
 * Pure over (credentials, now): the token generator takes an injected clock, so a test pins the
 * exact token for fixed credentials and time.
 */

import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { errorKind } from '../errors.js';
import { type Clock, systemClock } from '../time/clock.js';

/** AWS credentials (what the SDK's default provider chain resolves). */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Resolves credentials (e.g. an AWS SDK client's `config.credentials`). */
export type CredentialProvider = () => Promise<AwsCredentials>;

/** What a token is signed for. */
export interface IamAuthTarget {
  /** The IAM-enabled ElastiCache user id (= user name). */
  readonly userId: string;
  /** The replication group id (lower-cased: ElastiCache ids are case-insensitive, the signature is not). */
  readonly cacheName: string;
  /** The cache's region. */
  readonly region: string;
}

/** Token lifetime ElastiCache accepts, seconds (its maximum). */
export const IAM_TOKEN_TTL_SECONDS = 900;

type SourceData = string | ArrayBuffer | ArrayBufferView;

function bytes(data: SourceData): Buffer {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.from(data);
}

/** node:crypto SHA-256 / HMAC-SHA-256 in the shape SignatureV4 expects. */
class NodeSha256 {
  private hash: Hash | Hmac;
  private readonly secret: Buffer | undefined;
  constructor(secret?: SourceData) {
    this.secret = secret === undefined ? undefined : bytes(secret);
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', this.secret);
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

/**
 * The IAM auth token (the `AUTH` password) for `target`, signed at `clock.now()`:
 * `<cacheName>/?Action=connect&User=<userId>&X-Amz-Algorithm=…&X-Amz-Signature=…`.
 */
export async function elastiCacheAuthToken(
  target: IamAuthTarget,
  credentials: AwsCredentials,
  clock: Clock = systemClock,
): Promise<string> {
  const host = target.cacheName.toLowerCase();
  const signer = new SignatureV4({
    service: 'elasticache',
    region: target.region,
    credentials,
    sha256: NodeSha256,
  });
  const signed = await signer.presign(
    {
      method: 'GET',
      protocol: 'http:',
      hostname: host,
      path: '/',
      query: { Action: 'connect', User: target.userId },
      headers: { host },
    },
    { expiresIn: IAM_TOKEN_TTL_SECONDS, signingDate: new Date(clock.now()) },
  );
  const query = Object.entries(signed.query ?? {})
    .flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x) => [k, String(x)] as const))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${rfc3986(k)}=${rfc3986(v)}`)
    .join('&');
  return `${host}/?${query}`;
}

/** SigV4's URI encoding (RFC 3986 unreserved characters kept). */
function rfc3986(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** Where a refreshed token goes (the client's options ioredis reads on every connect). */
export type TokenSink = (token: string) => void;

/** Options of {@link IamTokenRefresher}. */
export interface IamTokenRefresherOptions {
  readonly target: IamAuthTarget;
  readonly credentials: CredentialProvider;
  readonly clock?: Clock;
  /**
   * How often to sign a new token, ms: well inside the 15-minute validity so a reconnect always
   * finds a valid one. @default 600_000 (10 minutes)
   */
  readonly refreshEveryMs?: number;
  /** Called when a refresh fails (the previous token stays until it expires). @default ignore */
  readonly onError?: (error: unknown) => void;
}

/** Thrown when no first token could be signed (credentials unavailable). */
export class IamAuthTokenError extends errorKind('IamAuthTokenError', 'redis.iam-auth-token') {}

/**
 * Keeps a fresh token in `sink`: one at {@link IamTokenRefresher.start}, then every
 * `refreshEveryMs`. The timer is unref'd (it never keeps a process alive); `stop()` ends it.
 */
export class IamTokenRefresher {
  private timer: NodeJS.Timeout | undefined;
  private readonly clock: Clock;
  /** The last token signed, or undefined before the first. */
  current: string | undefined;

  constructor(
    private readonly options: IamTokenRefresherOptions,
    private readonly sink: TokenSink,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Signs a token now and hands it to the sink. */
  async refresh(): Promise<string> {
    const token = await elastiCacheAuthToken(
      this.options.target,
      await this.options.credentials(),
      this.clock,
    );
    this.current = token;
    this.sink(token);
    return token;
  }

  /** Signs the first token, then keeps refreshing. */
  async start(): Promise<void> {
    try {
      await this.refresh();
    } catch (error) {
      throw new IamAuthTokenError(
        `Could not sign an ElastiCache IAM auth token for user ${this.options.target.userId}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    this.timer = setInterval(() => {
      this.refresh().catch((error: unknown) => this.options.onError?.(error));
    }, this.options.refreshEveryMs ?? 600_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

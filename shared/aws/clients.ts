/**
 * AWS SDK v3 clients for handlers, tools and the local runner. In AWS the endpoints are the
 * defaults; locally the standard service-specific variables (`AWS_ENDPOINT_URL_DYNAMODB`,
 * `AWS_ENDPOINT_URL_KINESIS`, `AWS_ENDPOINT_URL_SSM`, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL_SQS`)
 * point the *same* clients at the emulators.
 */
import http from 'node:http';
import https from 'node:https';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ElastiCacheClient } from '@aws-sdk/client-elasticache';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { NodeHttpHandler } from '@smithy/node-http-handler';

type Env = Readonly<Record<string, string | undefined>>;

/** Static credentials (the local runtime's per-principal access keys). */
export interface StaticCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** Where each service lives; `undefined` means the AWS default endpoint of `region`. */
export interface AwsEndpoints {
  readonly region: string;
  /**
   * Credentials for the given endpoints (local emulators only: without an endpoint the SDK's
   * default chain is used). Locally each access key names a principal whose synthesized IAM
   * policy the endpoints enforce (docs/local-region.md, "IAM"). @default the operator's key, `local`
   */
  readonly credentials?: StaticCredentials;
  readonly dynamodb?: string;
  readonly kinesis?: string;
  readonly ssm?: string;
  readonly s3?: string;
  readonly sqs?: string;
  readonly elasticache?: string;
}

/** `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`), when both are set. */
export function credentialsFromEnv(env: Env = process.env): StaticCredentials | undefined {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey) return undefined;
  return {
    accessKeyId,
    secretAccessKey,
    ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
  };
}

/**
 * Reads the region and service endpoints from the standard SDK variables, and the credentials
 * local endpoints are called with (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`).
 */
export function endpointsFromEnv(env: Env = process.env): AwsEndpoints {
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? env.PACELINE_REGION ?? 'us-east-1';
  const credentials = credentialsFromEnv(env);
  return {
    region,
    ...(credentials ? { credentials } : {}),
    dynamodb: env.AWS_ENDPOINT_URL_DYNAMODB || undefined,
    kinesis: env.AWS_ENDPOINT_URL_KINESIS || undefined,
    ssm: env.AWS_ENDPOINT_URL_SSM || undefined,
    s3: env.AWS_ENDPOINT_URL_S3 || undefined,
    sqs: env.AWS_ENDPOINT_URL_SQS || undefined,
    elasticache: env.AWS_ENDPOINT_URL_ELASTICACHE || undefined,
  };
}

/** Environment variables that point a process's SDK clients at `endpoints`. */
export function endpointsToEnv(endpoints: AwsEndpoints): Record<string, string> {
  const env: Record<string, string> = { AWS_REGION: endpoints.region };
  if (endpoints.dynamodb) env.AWS_ENDPOINT_URL_DYNAMODB = endpoints.dynamodb;
  if (endpoints.kinesis) env.AWS_ENDPOINT_URL_KINESIS = endpoints.kinesis;
  if (endpoints.ssm) env.AWS_ENDPOINT_URL_SSM = endpoints.ssm;
  if (endpoints.s3) env.AWS_ENDPOINT_URL_S3 = endpoints.s3;
  if (endpoints.sqs) env.AWS_ENDPOINT_URL_SQS = endpoints.sqs;
  if (endpoints.elasticache) env.AWS_ENDPOINT_URL_ELASTICACHE = endpoints.elasticache;
  return env;
}

/**
 * Bounds for callers on a deadline (the pacer's 10 s ticks): without them an unreachable endpoint
 * holds a call for the SDK's retries and the OS connect timeout.
 */
export interface ClientTimeouts {
  /** Connection timeout, ms. @default the SDK's (none) */
  readonly connectionTimeoutMs?: number;
  /** Per-request timeout, ms. @default the SDK's (none) */
  readonly requestTimeoutMs?: number;
  /** Attempts including the first. @default the SDK's (3) */
  readonly maxAttempts?: number;
}

/** Keep-alive HTTP/1.1 handler: fast against emulators and required by kinesalite (no HTTP/2). */
function http1Handler(timeouts: ClientTimeouts = {}): NodeHttpHandler {
  return new NodeHttpHandler({
    httpAgent: new http.Agent({ keepAlive: true, maxSockets: 64 }),
    httpsAgent: new https.Agent({ keepAlive: true, maxSockets: 64 }),
    ...(timeouts.connectionTimeoutMs ? { connectionTimeout: timeouts.connectionTimeoutMs } : {}),
    ...(timeouts.requestTimeoutMs
      ? { requestTimeout: timeouts.requestTimeoutMs, throwOnRequestTimeout: true }
      : {}),
  });
}

/**
 * The operator's local key: what a client of a local endpoint uses unless its endpoints carry
 * credentials (no credential chain is searched locally).
 */
const operatorCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/** The credentials for local endpoints. */
function localCredentials(endpoints: AwsEndpoints): StaticCredentials {
  return endpoints.credentials ?? operatorCredentials;
}

/** A DynamoDB client for `endpoints`. */
export function dynamoDbClient(
  endpoints: AwsEndpoints = endpointsFromEnv(),
  timeouts: ClientTimeouts = {},
): DynamoDBClient {
  return new DynamoDBClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.dynamodb ? { endpoint: endpoints.dynamodb, credentials: localCredentials(endpoints) } : {}),
  });
}

/** A Kinesis client for `endpoints` (always the HTTP/1.1 handler: kinesalite fails on HTTP/2). */
export function kinesisClient(endpoints: AwsEndpoints = endpointsFromEnv()): KinesisClient {
  return new KinesisClient({
    region: endpoints.region,
    requestHandler: http1Handler(),
    ...(endpoints.kinesis ? { endpoint: endpoints.kinesis, credentials: localCredentials(endpoints) } : {}),
  });
}

/** An SSM client for `endpoints`. */
export function ssmClient(
  endpoints: AwsEndpoints = endpointsFromEnv(),
  timeouts: ClientTimeouts = {},
): SSMClient {
  return new SSMClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.ssm ? { endpoint: endpoints.ssm, credentials: localCredentials(endpoints) } : {}),
  });
}

/** An S3 client for `endpoints` (path-style addressing against an emulator). */
export function s3Client(endpoints: AwsEndpoints = endpointsFromEnv()): S3Client {
  return new S3Client({
    region: endpoints.region,
    requestHandler: http1Handler(),
    ...(endpoints.s3
      ? { endpoint: endpoints.s3, forcePathStyle: true, credentials: localCredentials(endpoints) }
      : {}),
  });
}

/** An SQS client for `endpoints`. */
export function sqsClient(endpoints: AwsEndpoints = endpointsFromEnv()): SQSClient {
  return new SQSClient({
    region: endpoints.region,
    requestHandler: http1Handler(),
    ...(endpoints.sqs ? { endpoint: endpoints.sqs, credentials: localCredentials(endpoints) } : {}),
  });
}

/** An ElastiCache (control plane) client for `endpoints`. */
export function elastiCacheClient(
  endpoints: AwsEndpoints = endpointsFromEnv(),
  timeouts: ClientTimeouts = {},
): ElastiCacheClient {
  return new ElastiCacheClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.elasticache
      ? { endpoint: endpoints.elasticache, credentials: localCredentials(endpoints) }
      : {}),
  });
}

/** Environment variable naming every region Paceline runs in (comma-separated). */
export const REGIONS_ENV = 'PACELINE_REGIONS';
/**
 * Environment variable with the API endpoints of every region, locally only:
 * `{"us-west-2": {"ssm": "http://…", "elasticache": "http://…"}, …}`. In AWS it is unset and the
 * SDK resolves each region's endpoints itself.
 */
export const REGION_ENDPOINTS_ENV = 'PACELINE_REGION_ENDPOINTS';

/**
 * The endpoints of each peer region (every region in `PACELINE_REGIONS` but `self`): the AWS
 * defaults, or the local ones from `PACELINE_REGION_ENDPOINTS`.
 */
export function peerEndpointsFromEnv(self: string, env: Env = process.env): AwsEndpoints[] {
  const regions = (env[REGIONS_ENV] ?? '')
    .split(',')
    .map((r) => r.trim())
    .filter((r) => r !== '' && r !== self);
  let local: Record<string, { ssm?: string; elasticache?: string }> = {};
  const raw = env[REGION_ENDPOINTS_ENV];
  if (raw) {
    try {
      local = JSON.parse(raw) as typeof local;
    } catch (error) {
      throw new Error(
        `${REGION_ENDPOINTS_ENV} is not JSON ({"<region>": {"ssm": url, "elasticache": url}}).`,
        {
          cause: error,
        },
      );
    }
  }
  const credentials = credentialsFromEnv(env);
  return regions.map((region) => ({
    region,
    // The caller's own credentials: a peer region's endpoints check the same principal.
    ...(credentials ? { credentials } : {}),
    ...(local[region]?.ssm ? { ssm: local[region].ssm } : {}),
    ...(local[region]?.elasticache ? { elasticache: local[region].elasticache } : {}),
  }));
}

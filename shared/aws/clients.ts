/**
 * AWS SDK v3 clients for handlers, tools, the local runner and the ad-server client. In AWS the
 * endpoints are the defaults; locally the standard service-specific variables
 * (`AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_KINESIS`, `AWS_ENDPOINT_URL_SSM`, …) point the
 * *same* clients at the emulators. Only the DynamoDB, Kinesis and SSM clients live here: they are
 * what the ad-server client (`paceline/client`) imports, and each SDK client installs megabytes;
 * the S3, SQS and ElastiCache-API clients are in `ops-clients.ts`.
 */
import http from 'node:http';
import https from 'node:https';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { SSMClient } from '@aws-sdk/client-ssm';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { type AwsEndpoints, endpointsFromEnv, requireLocal, type StaticCredentials } from './endpoints.js';

export * from './endpoints.js';

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
export function http1Handler(timeouts: ClientTimeouts = {}): NodeHttpHandler {
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
 * credentials (emulators get fixed credentials, so no credential chain is searched locally).
 */
const operatorCredentials: StaticCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/** The credentials for local endpoints. */
export function localCredentials(endpoints: AwsEndpoints): StaticCredentials {
  return endpoints.credentials ?? operatorCredentials;
}

/** A DynamoDB client for `endpoints`. */
export function dynamoDbClient(
  endpoints: AwsEndpoints = endpointsFromEnv(),
  timeouts: ClientTimeouts = {},
): DynamoDBClient {
  requireLocal(endpoints, 'dynamodb');
  return new DynamoDBClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.dynamodb ? { endpoint: endpoints.dynamodb, credentials: localCredentials(endpoints) } : {}),
  });
}

/** A Kinesis client for `endpoints` (always the HTTP/1.1 handler: kinesalite fails on HTTP/2). */
export function kinesisClient(endpoints: AwsEndpoints = endpointsFromEnv()): KinesisClient {
  requireLocal(endpoints, 'kinesis');
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
  requireLocal(endpoints, 'ssm');
  return new SSMClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.ssm ? { endpoint: endpoints.ssm, credentials: localCredentials(endpoints) } : {}),
  });
}

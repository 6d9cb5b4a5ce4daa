/**
 * The S3, SQS and ElastiCache-API clients: used by the stream functions (dead-letter payloads),
 * the pacer (peer caches), the local runner and the operator tools — never by the ad-server
 * client, whose package therefore does not install them (docs/client.md, "Package"). Built like
 * the clients of `clients.ts` (HTTP/1.1 keep-alive, local endpoints and credentials, `localOnly`).
 */
import { ElastiCacheClient } from '@aws-sdk/client-elasticache';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import {
  type AwsEndpoints,
  type ClientTimeouts,
  endpointsFromEnv,
  http1Handler,
  localCredentials,
  requireLocal,
} from './clients.js';

/** An S3 client for `endpoints` (path-style addressing against an emulator). */
export function s3Client(endpoints: AwsEndpoints = endpointsFromEnv()): S3Client {
  requireLocal(endpoints, 's3');
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
  requireLocal(endpoints, 'sqs');
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
  requireLocal(endpoints, 'elasticache');
  return new ElastiCacheClient({
    region: endpoints.region,
    requestHandler: http1Handler(timeouts),
    ...(timeouts.maxAttempts ? { maxAttempts: timeouts.maxAttempts } : {}),
    ...(endpoints.elasticache
      ? { endpoint: endpoints.elasticache, credentials: localCredentials(endpoints) }
      : {}),
  });
}

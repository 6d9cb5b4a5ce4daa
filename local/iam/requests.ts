/**
 * Maps a request to a local AWS endpoint onto what IAM authorizes: the action(s) and the resource
 * ARN(s), one check per resource, as AWS checks them.
 *
 * - DynamoDB, Kinesis, SSM (JSON protocols, `x-amz-target`): the operation is the action; the
 *   resource is the table (`TableName`, or `/index/<IndexName>` for an index), the stream
 *   (`StreamName` / `StreamARN`, or the stream a `GetRecords` shard iterator belongs to), the
 *   parameter (`Name`, each of `Names`, the `Path`). `BatchGetItem` / `BatchWriteItem` are checked
 *   per table of `RequestItems`, transactions per item with the item's own action.
 * - S3 (REST, path-style): method, sub-resource and key give the action (`GET` object →
 *   `s3:GetObject`, `PUT` → `s3:PutObject` plus `s3:GetObject` on a copy source, list →
 *   `s3:ListBucket`, multi-object delete → `s3:DeleteObject` per key, …).
 * - SQS (JSON or Query protocol) and ElastiCache (Query protocol): `Action` / target, the queue
 *   (`QueueUrl` / `QueueName`) or the replication group (`ReplicationGroupId`).
 *
 * A request that cannot be mapped is refused for every principal but the operator, with the
 * reason: an unmapped call would otherwise pass unchecked.
 */
import { createDecipheriv } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { createRequire } from 'node:module';

/** The local endpoints the gate stands in front of. */
export type GatedService = 'dynamodb' | 'kinesis' | 'ssm' | 's3' | 'sqs' | 'elasticache';

/** What the gate saw of a request. */
export interface GatedRequest {
  readonly method: string;
  /** Path and query, as received. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/** One IAM check. */
export interface Check {
  readonly action: string;
  readonly resource: string;
}

/** The checks of a request, or why it cannot be mapped. */
export type Mapping = { readonly checks: readonly Check[] } | { readonly error: string };

/** Where the endpoint is. */
export interface Where {
  readonly region: string;
  readonly account: string;
}

/** Whether the gate must read the body to map the request (S3 only for multi-object delete). */
export function needsBody(service: GatedService, method: string, url: string): boolean {
  if (service !== 's3') return true;
  return method === 'POST' && new URL(url, 'http://x').searchParams.has('delete');
}

/** The access key id a request is signed with (Authorization header or presigned query). */
export function accessKeyOf(headers: IncomingHttpHeaders, url: string): string | undefined {
  const auth = headers.authorization;
  const m = typeof auth === 'string' ? /Credential=([^/,\s]+)\//.exec(auth) : null;
  if (m) return m[1];
  const q = new URL(url, 'http://x').searchParams.get('X-Amz-Credential');
  return q ? q.split('/')[0] : undefined;
}

function json(body: Buffer): Record<string, unknown> {
  if (body.length === 0) return {};
  return JSON.parse(body.toString('utf8')) as Record<string, unknown>;
}

const arn = (service: string, w: Where, resource: string) =>
  `arn:aws:${service}:${w.region}:${w.account}:${resource}`;

function tableArn(w: Where, table: unknown, index?: unknown): string {
  const name = String(table);
  const base = name.startsWith('arn:') ? name : arn('dynamodb', w, `table/${name}`);
  return typeof index === 'string' ? `${base}/index/${index}` : base;
}

const DYNAMODB_UNSCOPED = new Set([
  'ListTables',
  'DescribeLimits',
  'DescribeEndpoints',
  'ListBackups',
  'ListGlobalTables',
]);
const TRANSACT_ACTIONS: Record<string, string> = {
  ConditionCheck: 'ConditionCheckItem',
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  Get: 'GetItem',
};

function dynamodb(op: string, input: Record<string, unknown>, w: Where): Mapping {
  const action = `dynamodb:${op}`;
  if (op === 'BatchGetItem' || op === 'BatchWriteItem') {
    const tables = Object.keys((input.RequestItems ?? {}) as object);
    if (tables.length === 0) return { error: `${op} without RequestItems` };
    return { checks: tables.map((t) => ({ action, resource: tableArn(w, t) })) };
  }
  if (op === 'TransactWriteItems' || op === 'TransactGetItems') {
    const checks: Check[] = [];
    for (const item of (input.TransactItems ?? []) as Record<string, { TableName?: string }>[]) {
      for (const [kind, detail] of Object.entries(item)) {
        const sub = TRANSACT_ACTIONS[kind];
        if (!sub || !detail?.TableName) return { error: `${op} item ${kind} cannot be mapped` };
        checks.push({ action: `dynamodb:${sub}`, resource: tableArn(w, detail.TableName) });
      }
    }
    return checks.length > 0 ? { checks } : { error: `${op} without TransactItems` };
  }
  if (typeof input.TableName === 'string')
    return { checks: [{ action, resource: tableArn(w, input.TableName, input.IndexName) }] };
  if (typeof input.ResourceArn === 'string') return { checks: [{ action, resource: input.ResourceArn }] };
  if (DYNAMODB_UNSCOPED.has(op)) return { checks: [{ action, resource: '*' }] };
  return { error: `dynamodb:${op} names no table` };
}

let iteratorKey: { key: Buffer; iv: Buffer } | undefined;

/** The stream a kinesalite shard iterator belongs to (it encrypts `time/stream/shard/seq/…`). */
export function streamOfShardIterator(iterator: string): string | undefined {
  if (!iteratorKey) {
    const db = createRequire(import.meta.url)('kinesalite/db/index.js') as {
      ITERATOR_PWD_KEY: Buffer;
      ITERATOR_PWD_IV: Buffer;
    };
    iteratorKey = { key: db.ITERATOR_PWD_KEY, iv: db.ITERATOR_PWD_IV };
  }
  try {
    const buffer = Buffer.from(iterator, 'base64');
    const decipher = createDecipheriv('aes-256-cbc', iteratorKey.key, iteratorKey.iv);
    const text = Buffer.concat([decipher.update(buffer.subarray(8)), decipher.final()]).toString('utf8');
    return text.split('/')[1] || undefined;
  } catch {
    return undefined;
  }
}

function kinesis(op: string, input: Record<string, unknown>, w: Where): Mapping {
  const action = `kinesis:${op}`;
  const stream = (name: string) => arn('kinesis', w, `stream/${name}`);
  if (typeof input.StreamARN === 'string') return { checks: [{ action, resource: input.StreamARN }] };
  if (typeof input.StreamName === 'string')
    return { checks: [{ action, resource: stream(input.StreamName) }] };
  if (typeof input.ConsumerARN === 'string') return { checks: [{ action, resource: input.ConsumerARN }] };
  if (op === 'GetRecords' && typeof input.ShardIterator === 'string') {
    const name = streamOfShardIterator(input.ShardIterator);
    return name
      ? { checks: [{ action, resource: stream(name) }] }
      : { error: 'GetRecords with an unreadable shard iterator' };
  }
  if (op === 'ListStreams' || op === 'DescribeLimits') return { checks: [{ action, resource: '*' }] };
  return { error: `kinesis:${op} names no stream` };
}

function ssm(op: string, input: Record<string, unknown>, w: Where): Mapping {
  const action = `ssm:${op}`;
  const param = (name: string) =>
    name.startsWith('arn:') ? name : arn('ssm', w, `parameter${name.startsWith('/') ? '' : '/'}${name}`);
  if (typeof input.Name === 'string') return { checks: [{ action, resource: param(input.Name) }] };
  if (Array.isArray(input.Names) && input.Names.length > 0)
    return { checks: input.Names.map((n) => ({ action, resource: param(String(n)) })) };
  if (typeof input.Path === 'string')
    return {
      checks: [
        { action, resource: param(input.Path.length > 1 ? input.Path.replace(/\/$/, '') : input.Path) },
      ],
    };
  if (op === 'DescribeParameters') return { checks: [{ action, resource: '*' }] };
  return { error: `ssm:${op} names no parameter` };
}

const S3_OBJECT_SUB: Record<string, Record<string, string>> = {
  GET: {
    tagging: 'GetObjectTagging',
    acl: 'GetObjectAcl',
    uploadId: 'ListMultipartUploadParts',
    attributes: 'GetObjectAttributes',
  },
  PUT: {
    tagging: 'PutObjectTagging',
    acl: 'PutObjectAcl',
    uploadId: 'PutObject',
    retention: 'PutObjectRetention',
  },
  DELETE: {
    tagging: 'DeleteObjectTagging',
    uploadId: 'AbortMultipartUpload',
    versionId: 'DeleteObjectVersion',
  },
  POST: { uploads: 'PutObject', uploadId: 'PutObject' },
};

const S3_BUCKET_SUB: Record<string, Record<string, string>> = {
  GET: {
    location: 'GetBucketLocation',
    versioning: 'GetBucketVersioning',
    uploads: 'ListBucketMultipartUploads',
    versions: 'ListBucketVersions',
    policy: 'GetBucketPolicy',
    encryption: 'GetEncryptionConfiguration',
    tagging: 'GetBucketTagging',
    acl: 'GetBucketAcl',
    cors: 'GetBucketCORS',
  },
  PUT: {
    versioning: 'PutBucketVersioning',
    policy: 'PutBucketPolicy',
    encryption: 'PutEncryptionConfiguration',
    tagging: 'PutBucketTagging',
    acl: 'PutBucketAcl',
    cors: 'PutBucketCORS',
  },
  DELETE: { policy: 'DeleteBucketPolicy', tagging: 'PutBucketTagging', cors: 'PutBucketCORS' },
};

function s3(req: GatedRequest): Mapping {
  const url = new URL(req.url, 'http://x');
  const [bucket, ...keyParts] = url.pathname.slice(1).split('/');
  const key = keyParts.map(decodeURIComponent).join('/');
  const params = [...url.searchParams.keys()].filter((k) => !k.startsWith('X-Amz-') && !k.startsWith('x-id'));
  const method = req.method.toUpperCase();
  const one = (action: string, resource: string): Mapping => ({
    checks: [{ action: `s3:${action}`, resource }],
  });
  if (!bucket)
    return method === 'GET' ? one('ListAllMyBuckets', '*') : { error: `S3 ${method} / cannot be mapped` };
  const bucketArn = `arn:aws:s3:::${decodeURIComponent(bucket)}`;
  if (key === '' && keyParts.length === 0) {
    if (method === 'POST' && params.includes('delete')) {
      const keys = [...req.body.toString('utf8').matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) =>
        unescapeXml(m[1] as string),
      );
      if (keys.length === 0) return { error: 'S3 DeleteObjects without keys' };
      return { checks: keys.map((k) => ({ action: 's3:DeleteObject', resource: `${bucketArn}/${k}` })) };
    }
    const sub = params.find((p) => S3_BUCKET_SUB[method]?.[p]);
    if (sub) return one(S3_BUCKET_SUB[method]?.[sub] as string, bucketArn);
    const plain = params.filter(
      (p) =>
        ![
          'list-type',
          'prefix',
          'delimiter',
          'max-keys',
          'continuation-token',
          'start-after',
          'encoding-type',
          'marker',
          'fetch-owner',
        ].includes(p),
    );
    if (plain.length > 0) return { error: `S3 ${method} bucket ?${plain.join('&')} cannot be mapped` };
    if (method === 'GET' || method === 'HEAD') return one('ListBucket', bucketArn);
    if (method === 'PUT') return one('CreateBucket', bucketArn);
    if (method === 'DELETE') return one('DeleteBucket', bucketArn);
    return { error: `S3 ${method} on a bucket cannot be mapped` };
  }
  const objectArn = `${bucketArn}/${key}`;
  const sub = params.find((p) => S3_OBJECT_SUB[method]?.[p]);
  if (sub) return one(S3_OBJECT_SUB[method]?.[sub] as string, objectArn);
  if (method === 'GET' || method === 'HEAD')
    return one(params.includes('versionId') ? 'GetObjectVersion' : 'GetObject', objectArn);
  if (method === 'DELETE') return one('DeleteObject', objectArn);
  if (method === 'PUT') {
    const checks: Check[] = [{ action: 's3:PutObject', resource: objectArn }];
    const source = req.headers['x-amz-copy-source'];
    if (typeof source === 'string')
      checks.push({
        action: 's3:GetObject',
        resource: `arn:aws:s3:::${decodeURIComponent(source.replace(/^\//, '').split('?')[0] as string)}`,
      });
    return { checks };
  }
  return { error: `S3 ${method} on an object cannot be mapped` };
}

function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|amp|quot|apos|#\d+);/g, (_, e: string) =>
    e === 'lt'
      ? '<'
      : e === 'gt'
        ? '>'
        : e === 'amp'
          ? '&'
          : e === 'quot'
            ? '"'
            : e === 'apos'
              ? "'"
              : String.fromCharCode(Number(e.slice(1))),
  );
}

const SQS_BATCH: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

function sqs(req: GatedRequest, w: Where): Mapping {
  const target = req.headers['x-amz-target'];
  let op: string;
  let input: Record<string, unknown>;
  if (typeof target === 'string') {
    op = target.replace(/^AmazonSQS\./, '');
    input = json(req.body);
  } else {
    const form = new URLSearchParams(req.body.toString('utf8'));
    op = form.get('Action') ?? '';
    input = Object.fromEntries(form);
  }
  const action = `sqs:${SQS_BATCH[op] ?? op}`;
  if (op === 'ListQueues') return { checks: [{ action, resource: '*' }] };
  const queueUrl = typeof input.QueueUrl === 'string' ? new URL(input.QueueUrl) : undefined;
  const parts = queueUrl ? queueUrl.pathname.split('/').filter(Boolean) : [];
  const name = queueUrl
    ? parts[parts.length - 1]
    : typeof input.QueueName === 'string'
      ? input.QueueName
      : undefined;
  const account =
    parts.length === 2 && /^\d{12}$/.test(parts[0] as string) ? (parts[0] as string) : w.account;
  if (!op || !name) return { error: `sqs:${op || '?'} names no queue` };
  return { checks: [{ action, resource: `arn:aws:sqs:${w.region}:${account}:${name}` }] };
}

function elasticache(req: GatedRequest, w: Where): Mapping {
  const form = new URLSearchParams(req.body.toString('utf8'));
  const op = form.get('Action');
  if (!op) return { error: 'ElastiCache request without Action' };
  const action = `elasticache:${op}`;
  const group = form.get('ReplicationGroupId');
  if (op === 'DescribeReplicationGroups')
    return { checks: [{ action, resource: arn('elasticache', w, `replicationgroup:${group ?? '*'}`) }] };
  if (group) return { checks: [{ action, resource: arn('elasticache', w, `replicationgroup:${group}`) }] };
  if (op.startsWith('Describe')) return { checks: [{ action, resource: '*' }] };
  return { error: `elasticache:${op} cannot be mapped` };
}

const JSON_TARGET: Partial<Record<GatedService, RegExp>> = {
  dynamodb: /^DynamoDB_\d+\.(\w+)$/,
  kinesis: /^Kinesis_\d+\.(\w+)$/,
  ssm: /^AmazonSSM\.(\w+)$/,
};

/** The IAM checks of a request to a local endpoint of `service` (module comment). */
export function mapRequest(service: GatedService, req: GatedRequest, where: Where): Mapping {
  try {
    if (service === 's3') return s3(req);
    if (service === 'sqs') return sqs(req, where);
    if (service === 'elasticache') return elasticache(req, where);
    const target = JSON_TARGET[service]?.exec(String(req.headers['x-amz-target'] ?? ''));
    if (!target) return { error: `${service} request without an x-amz-target operation` };
    const op = target[1] as string;
    const input = json(req.body);
    if (service === 'dynamodb') return dynamodb(op, input, where);
    if (service === 'kinesis') return kinesis(op, input, where);
    return ssm(op, input, where);
  } catch (error) {
    return { error: `request cannot be read (${(error as Error).message})` };
  }
}

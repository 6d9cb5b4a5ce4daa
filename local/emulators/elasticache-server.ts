/**
 * A local ElastiCache API endpoint speaking the AWS Query protocol (form-encoded `Action=…`
 * requests, XML answers), so `@aws-sdk/client-elasticache` is used unchanged. It implements what
 * Paceline uses: `DescribeReplicationGroups` answers with the local region's Redis as the
 * replication group {@link cacheReplicationGroupId} (cluster mode: the configuration endpoint and
 * one node group per master; standalone: one node group with its primary endpoint), and
 * `ReplicationGroupNotFoundFault` for any other id, as AWS does.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { cacheReplicationGroupId } from '../../shared/region/resources.js';
import { closeServer, listenLoopback } from './net.js';
import type { RunningRedis } from './redis.js';

/** Options of {@link startElastiCacheServer}. */
export interface ElastiCacheServerOptions {
  readonly region: string;
  readonly redis: Pick<RunningRedis, 'mode' | 'nodes'>;
  /** Loopback port. @default a free port */
  readonly port?: number;
  /** Wraps the server's request handling before it listens (the local IAM gate). @default none */
  readonly guard?: (server: Server) => void;
}

/** A running local ElastiCache API endpoint. */
export interface RunningElastiCache {
  readonly url: string;
  /** Requests answered (tests check that discovery is cached). */
  readonly requests: () => number;
  stop(): Promise<void>;
}

const NS = 'http://elasticache.amazonaws.com/doc/2015-02-02/';

function escapeXml(s: string): string {
  return s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function endpointXml(tag: string, address: string): string {
  const [host, port] = address.split(':') as [string, string];
  return `<${tag}><Address>${escapeXml(host)}</Address><Port>${Number(port)}</Port></${tag}>`;
}

/** The `<ReplicationGroup>` element describing the local Redis. */
export function replicationGroupXml(region: string, redis: Pick<RunningRedis, 'mode' | 'nodes'>): string {
  const cluster = redis.mode === 'cluster';
  const groups = (cluster ? redis.nodes : redis.nodes.slice(0, 1))
    .map(
      (node, i) =>
        `<NodeGroup><NodeGroupId>${String(i + 1).padStart(4, '0')}</NodeGroupId><Status>available</Status>` +
        `${cluster ? '' : endpointXml('PrimaryEndpoint', node)}</NodeGroup>`,
    )
    .join('');
  return (
    '<ReplicationGroup>' +
    `<ReplicationGroupId>${cacheReplicationGroupId}</ReplicationGroupId>` +
    `<Description>Paceline live state (local ${escapeXml(region)})</Description>` +
    '<Status>available</Status>' +
    `<ClusterEnabled>${cluster}</ClusterEnabled>` +
    `<ClusterMode>${cluster ? 'enabled' : 'disabled'}</ClusterMode>` +
    (cluster ? endpointXml('ConfigurationEndpoint', redis.nodes[0] as string) : '') +
    `<NodeGroups>${groups}</NodeGroups>` +
    '<TransitEncryptionEnabled>false</TransitEncryptionEnabled>' +
    '<AtRestEncryptionEnabled>false</AtRestEncryptionEnabled>' +
    `<ARN>arn:aws:elasticache:${escapeXml(region)}:000000000000:replicationgroup:${cacheReplicationGroupId}</ARN>` +
    '</ReplicationGroup>'
  );
}

function sendXml(res: ServerResponse, status: number, xml: string): void {
  res.writeHead(status, { 'content-type': 'text/xml' });
  res.end(`<?xml version="1.0"?>\n${xml}`);
}

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  sendXml(
    res,
    status,
    `<ErrorResponse xmlns="${NS}"><Error><Type>Sender</Type><Code>${code}</Code>` +
      `<Message>${escapeXml(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
  );
}

/** Starts the endpoint on a free loopback port. */
export async function startElastiCacheServer(options: ElastiCacheServerOptions): Promise<RunningElastiCache> {
  let requests = 0;
  const server: Server = createServer(async (req, res) => {
    requests++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
    const action = form.get('Action');
    if (req.method !== 'POST' || !action) {
      sendError(res, 400, 'MissingAction', 'Expected a POST with Action=<operation> (AWS Query protocol).');
      return;
    }
    if (action !== 'DescribeReplicationGroups') {
      sendError(
        res,
        400,
        'InvalidAction',
        `Operation ${action} is not implemented by the local ElastiCache endpoint.`,
      );
      return;
    }
    const id = form.get('ReplicationGroupId');
    if (id !== null && id !== cacheReplicationGroupId) {
      sendError(res, 404, 'ReplicationGroupNotFoundFault', `ReplicationGroup ${id} not found.`);
      return;
    }
    sendXml(
      res,
      200,
      `<DescribeReplicationGroupsResponse xmlns="${NS}"><DescribeReplicationGroupsResult>` +
        `<ReplicationGroups>${replicationGroupXml(options.region, options.redis)}</ReplicationGroups>` +
        `</DescribeReplicationGroupsResult><ResponseMetadata><RequestId>${randomUUID()}</RequestId>` +
        '</ResponseMetadata></DescribeReplicationGroupsResponse>',
    );
  });
  options.guard?.(server);
  const { url } = await listenLoopback(server, options.port ?? 0);
  return { url, requests: () => requests, stop: () => closeServer(server) };
}

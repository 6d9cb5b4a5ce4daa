/**
 * Where the AWS SDK clients go, without loading the SDK: the services and their endpoint
 * variables, a region's endpoints from the environment, the local-only guard, and the URL a
 * built client would send to. `clients.ts` re-exports all of it; the operator CLI imports it
 * alone to decide and print its target before any SDK module loads.
 */
import { InvalidEnvError } from '../config/env.js';
import { PacelineError } from '../errors.js';

type Env = Readonly<Record<string, string | undefined>>;

/** The AWS services Paceline's clients reach, each with the variable that points it elsewhere. */
export const SERVICE_ENDPOINT_ENV = {
  dynamodb: 'AWS_ENDPOINT_URL_DYNAMODB',
  kinesis: 'AWS_ENDPOINT_URL_KINESIS',
  ssm: 'AWS_ENDPOINT_URL_SSM',
  s3: 'AWS_ENDPOINT_URL_S3',
  sqs: 'AWS_ENDPOINT_URL_SQS',
  elasticache: 'AWS_ENDPOINT_URL_ELASTICACHE',
} as const;

/** One of {@link SERVICE_ENDPOINT_ENV}'s services. */
export type AwsService = keyof typeof SERVICE_ENDPOINT_ENV;

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
  /**
   * A local region's endpoints: building a client for a service without an endpoint here throws
   * {@link LocalEndpointMissingError} instead of falling back to the SDK's default — the real AWS
   * endpoint of `region`. The operator tools set it for every local target. @default false
   */
  readonly localOnly?: boolean;
}

/** A client was asked for a service a local target has no endpoint for (never AWS instead). */
export class LocalEndpointMissingError extends PacelineError {
  override readonly name = 'LocalEndpointMissingError';
  override readonly code = 'aws.local-endpoint-missing';
  constructor(readonly service: AwsService) {
    super(
      `No local endpoint for ${service} (${SERVICE_ENDPOINT_ENV[service]} unset): a local target never falls back to AWS.`,
    );
  }
}

/** Throws {@link LocalEndpointMissingError} when `endpoints` is local-only and lacks `service`. */
export function requireLocal(endpoints: AwsEndpoints, service: AwsService): void {
  if (endpoints.localOnly && !endpoints[service]) throw new LocalEndpointMissingError(service);
}

/** What the endpoint resolution of an SDK v3 client exposes on its `config`. */
interface EndpointConfig {
  readonly endpoint?: () => Promise<{ protocol: string; hostname: string; port?: number; path?: string }>;
  readonly serviceConfiguredEndpoint?: () => Promise<string | undefined>;
  readonly endpointProvider: (params: Record<string, unknown>, context: object) => { url: URL };
  readonly useFipsEndpoint: () => Promise<boolean>;
  readonly useDualstackEndpoint: () => Promise<boolean>;
  readonly accountIdEndpointMode?: () => Promise<string>;
}

/**
 * The URL a client sends its requests to, as the SDK resolves it, without sending anything: the
 * explicit endpoint, else a configured one (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_<SERVICE>`,
 * `endpoint_url` in the shared config file), else the service's endpoint for `region` from the
 * SDK's endpoint rules (FIPS and dual-stack settings included). The operator tools print it in
 * their target line. DynamoDB's account-based endpoints (`<account>.ddb.<region>…`, used when
 * the credentials carry an account id) are not known before the credentials are: the regional
 * endpoint is named then.
 */
export async function clientEndpoint(client: { readonly config: object }, region: string): Promise<string> {
  const config = client.config as EndpointConfig;
  if (config.endpoint) {
    const e = await config.endpoint();
    return `${e.protocol}//${e.hostname}${e.port ? `:${e.port}` : ''}`;
  }
  const configured = await config.serviceConfiguredEndpoint?.();
  if (configured) return configured.replace(/\/$/, '');
  const params: Record<string, unknown> = {
    Region: region,
    UseFIPS: await config.useFipsEndpoint(),
    UseDualStack: await config.useDualstackEndpoint(),
    ...(config.accountIdEndpointMode ? { AccountIdEndpointMode: await config.accountIdEndpointMode() } : {}),
  };
  return config.endpointProvider(params, {}).url.href.replace(/\/$/, '');
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
      throw new InvalidEnvError(
        REGION_ENDPOINTS_ENV,
        raw,
        `JSON of the form {"<region>": {"ssm": url, "elasticache": url}} (${(error as Error).message})`,
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

/** The AWS SDK's own switch for its Node.js version warning. */
export const SDK_NODE_WARNING_ENV = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/**
 * Turns off the AWS SDK's NodeVersionSupportWarning (on Node < 22: "versions published after the
 * first week of January 2027 will require node >=22") for an interactive tool's process, unless
 * the user set the variable. Paceline's supported Node is ≥ 22 (`engines`; Lambda runs 24) and
 * npm says so at install time on an older Node (EBADENGINE); repeating the SDK's notice in every
 * command's output adds nothing but noise (README, "Prerequisites"). Call it before the first SDK
 * client is built.
 */
export function quietSdkNodeWarning(env: NodeJS.ProcessEnv = process.env): void {
  if (env[SDK_NODE_WARNING_ENV] === undefined) env[SDK_NODE_WARNING_ENV] = 'true';
}

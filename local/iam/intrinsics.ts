/**
 * Resolution of CloudFormation intrinsics in a synthesized template to the values the LOCAL
 * region's resources have: `Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::Select`, `Fn::Split`,
 * `Fn::If` (with the template's conditions), `Fn::FindInMap`, `Fn::GetAZs`, `Fn::ImportValue`,
 * `Fn::Base64`, pseudo parameters, and nested stacks (a nested template's parameters come from
 * its parent's `AWS::CloudFormation::Stack` resource; `Outputs.X` of a nested stack is resolved
 * in the nested template).
 *
 * Names a template spells out (tables, streams, queues, parameters, functions) are used as they
 * are: the local runtime creates its resources under the same names. A bucket's name is left to
 * CloudFormation in AWS; locally it is the description's, found through the environment variable
 * that carries the bucket to the functions ({@link ScopeOptions.bucketName}). Whatever cannot be
 * resolved becomes `unresolved:<what>` (it matches no local ARN: calls on it are refused) and is
 * reported in {@link Scope.diagnostics}.
 */

/** A CloudFormation template, as synthesized. */
export interface CfnTemplate {
  readonly Resources?: Readonly<Record<string, CfnResource>>;
  readonly Parameters?: Readonly<Record<string, { readonly Default?: unknown }>>;
  readonly Conditions?: Readonly<Record<string, unknown>>;
  readonly Mappings?: Readonly<Record<string, Readonly<Record<string, Readonly<Record<string, unknown>>>>>>;
  readonly Outputs?: Readonly<
    Record<string, { readonly Value: unknown; readonly Export?: { readonly Name: unknown } }>
  >;
}

/** One resource of a template. */
export interface CfnResource {
  readonly Type: string;
  readonly Properties?: Readonly<Record<string, unknown>>;
  readonly Metadata?: Readonly<Record<string, unknown>>;
}

/** Marks a value that CloudFormation would drop (`AWS::NoValue`). */
export const NO_VALUE: unique symbol = Symbol('AWS::NoValue');

/** What a {@link Scope} needs besides its template. */
export interface ScopeOptions {
  readonly stackName: string;
  readonly region: string;
  readonly account: string;
  /** Nested template by the asset path of its `AWS::CloudFormation::Stack` resource. */
  readonly readNested: (assetPath: string) => CfnTemplate;
  /** The local name of a bucket without a `BucketName`, given its logical id and scope. */
  readonly bucketName: (scope: Scope, logicalId: string) => string | undefined;
  /** Every top-level scope of the assembly (`Fn::ImportValue`). */
  readonly siblings: () => readonly Scope[];
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** One template instance (a stack, or a nested stack inside its parent) and its resolution. */
export class Scope {
  readonly children: Scope[] = [];
  readonly diagnostics: string[];
  private readonly memo = new Map<string, unknown>();

  constructor(
    readonly template: CfnTemplate,
    readonly options: ScopeOptions,
    /** Raw parameter values from the parent (resolved in `parent`). */
    private readonly parameterValues: Readonly<Record<string, unknown>> = {},
    readonly parent?: Scope,
    /** `Stack` or `Stack/NestedLogicalId/…`. */
    readonly path: string = options.stackName,
  ) {
    this.diagnostics = parent ? parent.diagnostics : [];
    for (const [id, r] of Object.entries(template.Resources ?? {})) {
      if (r.Type !== 'AWS::CloudFormation::Stack') continue;
      const assetPath = r.Metadata?.['aws:asset:path'];
      if (typeof assetPath !== 'string') {
        this.diagnostics.push(`${path}/${id}: nested stack without aws:asset:path metadata (not read)`);
        continue;
      }
      const child = new Scope(
        options.readNested(assetPath),
        { ...options, stackName: `${options.stackName}-${id}` },
        (r.Properties?.Parameters ?? {}) as Record<string, unknown>,
        this,
        `${path}/${id}`,
      );
      this.children.push(child);
    }
  }

  get region(): string {
    return this.options.region;
  }

  get account(): string {
    return this.options.account;
  }

  /** This scope and every nested one. */
  *all(): Generator<Scope> {
    yield this;
    for (const c of this.children) yield* c.all();
  }

  /** Resolves every intrinsic in `value` (objects and arrays deeply). */
  resolve(value: unknown): unknown {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v)).filter((v) => v !== NO_VALUE);
    if (!isObject(value)) return value;
    const keys = Object.keys(value);
    if (keys.length === 1) {
      const key = keys[0] as string;
      if (key === 'Ref' || key === 'Condition' || key.startsWith('Fn::'))
        return this.intrinsic(key, value[key]);
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const r = this.resolve(v);
      if (r !== NO_VALUE) out[k] = r;
    }
    return out;
  }

  /** Resolves to a string (lists are joined with commas, as CloudFormation would refuse them). */
  resolveString(value: unknown): string {
    const r = this.resolve(value);
    if (typeof r === 'string') return r;
    if (typeof r === 'number' || typeof r === 'boolean') return String(r);
    return this.unresolved(`non-string ${JSON.stringify(value).slice(0, 80)}`);
  }

  unresolved(what: string): string {
    this.diagnostics.push(`${this.path}: unresolved ${what}`);
    return `unresolved:${this.path}:${what}`;
  }

  private intrinsic(key: string, arg: unknown): unknown {
    switch (key) {
      case 'Ref':
        return this.ref(String(arg));
      case 'Fn::GetAtt': {
        const [id, attr] = Array.isArray(arg) ? arg : String(arg).split(/\.(.*)/s);
        return this.getAtt(String(id), String(attr));
      }
      case 'Fn::Join': {
        const [sep, items] = arg as [string, unknown];
        const parts = this.resolve(items);
        if (!Array.isArray(parts)) return this.unresolved('Fn::Join of a non-list');
        return parts.map((p) => (typeof p === 'string' ? p : this.resolveString(p))).join(sep);
      }
      case 'Fn::Sub':
        return this.sub(arg);
      case 'Fn::Select': {
        const [index, items] = arg as [unknown, unknown];
        const list = this.resolve(items);
        const i = Number(this.resolve(index));
        return Array.isArray(list) && i >= 0 && i < list.length ? list[i] : this.unresolved('Fn::Select');
      }
      case 'Fn::Split': {
        const [sep, source] = arg as [string, unknown];
        return this.resolveString(source).split(sep);
      }
      case 'Fn::If': {
        const [condition, whenTrue, whenFalse] = arg as [string, unknown, unknown];
        return this.resolve(this.condition(condition) ? whenTrue : whenFalse);
      }
      case 'Condition':
        return this.condition(String(arg));
      case 'Fn::Equals': {
        const [a, b] = arg as [unknown, unknown];
        return JSON.stringify(this.resolve(a)) === JSON.stringify(this.resolve(b));
      }
      case 'Fn::Not':
        return !this.resolve((arg as unknown[])[0]);
      case 'Fn::And':
        return (arg as unknown[]).every((c) => this.resolve(c) === true);
      case 'Fn::Or':
        return (arg as unknown[]).some((c) => this.resolve(c) === true);
      case 'Fn::FindInMap': {
        const [map, top, second] = (arg as unknown[]).map((v) => this.resolveString(v));
        const hit = this.template.Mappings?.[map as string]?.[top as string]?.[second as string];
        return hit === undefined
          ? this.unresolved(`Fn::FindInMap ${map}.${top}.${second}`)
          : this.resolve(hit);
      }
      case 'Fn::GetAZs':
        return ['a', 'b', 'c'].map((z) => `${this.region}${z}`);
      case 'Fn::Base64':
        return Buffer.from(this.resolveString(arg)).toString('base64');
      case 'Fn::ToJsonString':
        return JSON.stringify(this.resolve(arg));
      case 'Fn::ImportValue':
        return this.importValue(this.resolveString(arg));
      default:
        return this.unresolved(key);
    }
  }

  private condition(name: string): boolean {
    const c = this.template.Conditions?.[name];
    if (c === undefined) {
      this.unresolved(`condition ${name}`);
      return false;
    }
    return this.resolve(c) === true;
  }

  private sub(arg: unknown): string {
    const [text, vars] = Array.isArray(arg) ? (arg as [string, Record<string, unknown>]) : [String(arg), {}];
    return text.replace(/\$\{([^}]*)\}/g, (whole, name: string) => {
      if (name.startsWith('!')) return `\${${name.slice(1)}}`;
      if (name in vars) return this.resolveString(vars[name]);
      const dot = name.indexOf('.');
      if (dot > 0 && !name.startsWith('AWS::'))
        return this.resolveString(this.getAtt(name.slice(0, dot), name.slice(dot + 1)));
      const r = this.ref(name);
      return typeof r === 'string' ? r : whole;
    });
  }

  private importValue(name: string): unknown {
    for (const top of this.options.siblings()) {
      for (const scope of top.all()) {
        for (const out of Object.values(scope.template.Outputs ?? {})) {
          if (out.Export && scope.resolveString(out.Export.Name) === name) return scope.resolve(out.Value);
        }
      }
    }
    return this.unresolved(`Fn::ImportValue ${name}`);
  }

  /** `Ref` of a pseudo parameter, a template parameter or a resource. */
  ref(name: string): unknown {
    switch (name) {
      case 'AWS::Region':
        return this.region;
      case 'AWS::AccountId':
        return this.account;
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::StackName':
        return this.options.stackName;
      case 'AWS::StackId':
        return `arn:aws:cloudformation:${this.region}:${this.account}:stack/${this.options.stackName}/local`;
      case 'AWS::NoValue':
        return NO_VALUE;
    }
    if (this.template.Parameters?.[name]) {
      if (name in this.parameterValues) {
        const parent = this.parent as Scope;
        return parent.resolve(this.parameterValues[name]);
      }
      const d = this.template.Parameters[name]?.Default;
      return d === undefined ? this.unresolved(`parameter ${name}`) : d;
    }
    const resource = this.template.Resources?.[name];
    if (!resource) return this.unresolved(`Ref ${name}`);
    return this.cached(`ref:${name}`, () => this.refOf(name, resource));
  }

  private cached(key: string, make: () => unknown): unknown {
    if (!this.memo.has(key)) this.memo.set(key, make());
    return this.memo.get(key);
  }

  /** A physical name CloudFormation would generate (local stand-in: stack name + logical id). */
  generatedName(logicalId: string): string {
    return `${this.options.stackName}-${logicalId}`;
  }

  /** The resource's own name property, resolved, or the generated name. */
  nameOf(logicalId: string, property: string): string {
    const p = this.template.Resources?.[logicalId]?.Properties?.[property];
    return p === undefined ? this.generatedName(logicalId) : this.resolveString(p);
  }

  private arn(service: string, resource: string, region = this.region, account = this.account): string {
    return `arn:aws:${service}:${region}:${account}:${resource}`;
  }

  private refOf(id: string, r: CfnResource): unknown {
    switch (r.Type) {
      case 'AWS::DynamoDB::Table':
      case 'AWS::DynamoDB::GlobalTable':
        return this.nameOf(id, 'TableName');
      case 'AWS::Kinesis::Stream':
        return this.nameOf(id, 'Name');
      case 'AWS::S3::Bucket':
        return this.bucket(id);
      case 'AWS::SQS::Queue':
        return `https://sqs.${this.region}.amazonaws.com/${this.account}/${this.nameOf(id, 'QueueName')}`;
      case 'AWS::SSM::Parameter':
        return this.nameOf(id, 'Name');
      case 'AWS::IAM::Role':
        return this.nameOf(id, 'RoleName');
      case 'AWS::IAM::ManagedPolicy':
        return this.managedPolicyArn(id);
      case 'AWS::Lambda::Function':
        return this.nameOf(id, 'FunctionName');
      case 'AWS::ElastiCache::ReplicationGroup':
        return this.nameOf(id, 'ReplicationGroupId');
      case 'AWS::ElastiCache::User':
        return this.nameOf(id, 'UserId');
      case 'AWS::ElastiCache::UserGroup':
        return this.nameOf(id, 'UserGroupId');
      case 'AWS::Logs::LogGroup':
        return this.nameOf(id, 'LogGroupName');
      case 'AWS::SNS::Topic':
        return this.arn('sns', this.nameOf(id, 'TopicName'));
      case 'AWS::KMS::Key':
        return `local-key-${id}`;
      case 'AWS::KMS::Alias':
        return this.nameOf(id, 'AliasName');
      default:
        return `local-${id}`;
    }
  }

  private bucket(id: string): string {
    const explicit = this.template.Resources?.[id]?.Properties?.BucketName;
    if (explicit !== undefined) return this.resolveString(explicit);
    return (
      this.options.bucketName(this, id) ?? this.unresolved(`bucket ${id} (no function environment names it)`)
    );
  }

  /** ARN of a customer managed policy of this template. */
  managedPolicyArn(id: string): string {
    const props = this.template.Resources?.[id]?.Properties ?? {};
    const path = props.Path === undefined ? '/' : this.resolveString(props.Path);
    return `arn:aws:iam::${this.account}:policy${path}${this.nameOf(id, 'ManagedPolicyName')}`;
  }

  /** `Fn::GetAtt` of a resource (or `Outputs.X` of a nested stack). */
  getAtt(id: string, attr: string): unknown {
    const r = this.template.Resources?.[id];
    if (!r) return this.unresolved(`GetAtt ${id}.${attr}`);
    return this.cached(`att:${id}.${attr}`, () => this.attOf(id, r, attr));
  }

  private attOf(id: string, r: CfnResource, attr: string): unknown {
    const name = () => String(this.refOf(id, r));
    switch (`${r.Type}.${attr}`) {
      case 'AWS::DynamoDB::Table.Arn':
      case 'AWS::DynamoDB::GlobalTable.Arn':
        return this.arn('dynamodb', `table/${name()}`);
      case 'AWS::DynamoDB::Table.StreamArn':
      case 'AWS::DynamoDB::GlobalTable.StreamArn':
        return this.arn('dynamodb', `table/${name()}/stream/local`);
      case 'AWS::Kinesis::Stream.Arn':
        return this.arn('kinesis', `stream/${name()}`);
      case 'AWS::S3::Bucket.Arn':
        return `arn:aws:s3:::${name()}`;
      case 'AWS::SQS::Queue.Arn':
        return this.arn('sqs', this.nameOf(id, 'QueueName'));
      case 'AWS::SQS::Queue.QueueName':
        return this.nameOf(id, 'QueueName');
      case 'AWS::SQS::Queue.QueueUrl':
        return name();
      case 'AWS::IAM::Role.Arn':
        return `arn:aws:iam::${this.account}:role/${name()}`;
      case 'AWS::Lambda::Function.Arn':
        return this.arn('lambda', `function:${name()}`);
      case 'AWS::KMS::Key.Arn':
        return this.arn('kms', `key/${name()}`);
      case 'AWS::KMS::Key.KeyId':
        return name();
      case 'AWS::SSM::Parameter.Value':
        return this.resolve(r.Properties?.Value);
      case 'AWS::SNS::Topic.TopicArn':
        return name();
      case 'AWS::Logs::LogGroup.Arn':
        return this.arn('logs', `log-group:${name()}:*`);
      case 'AWS::ElastiCache::User.Arn':
        return this.arn('elasticache', `user:${name()}`);
      case 'AWS::ElastiCache::UserGroup.Arn':
        return this.arn('elasticache', `usergroup:${name()}`);
      case 'AWS::ElastiCache::ReplicationGroup.Arn':
        return this.arn('elasticache', `replicationgroup:${name()}`);
    }
    if (r.Type === 'AWS::CloudFormation::Stack' && attr.startsWith('Outputs.')) {
      const child = this.children.find((c) => c.path === `${this.path}/${id}`);
      const out = child?.template.Outputs?.[attr.slice('Outputs.'.length)];
      return child && out ? child.resolve(out.Value) : this.unresolved(`GetAtt ${id}.${attr}`);
    }
    // An ARN of a type not listed above would reach a policy unresolved: say so. Other attributes
    // (endpoints, ids of network resources) never reach an IAM policy.
    if (attr.endsWith('Arn')) return this.unresolved(`GetAtt ${id}.${attr} (${r.Type})`);
    return `local-${id}-${attr}`;
  }
}

/**
 * The AWS SDK v3 client types the package's declarations name, described by what Paceline uses of
 * them. `dist/client.js` bundles its own copy of the SDK and installing the package installs no
 * `@aws-sdk/*` package, so the SDK's declarations are not there to import. A client made with the
 * SDK (`new DynamoDBClient({ ... })`, `new KinesisClient({ ... })`) is assignable to these.
 */

/** A `DynamoDBClient` of `@aws-sdk/client-dynamodb`: the bundled document client wraps it. */
export interface DynamoDBClient {
  send(command: object, options?: object): Promise<unknown>;
  destroy(): void;
  readonly config: object;
  readonly middlewareStack: object;
}

/** A `KinesisClient` of `@aws-sdk/client-kinesis`: the event producers send it `PutRecordsCommand`s. */
export interface KinesisClient {
  send(command: object, options?: object): Promise<unknown>;
  destroy(): void;
}

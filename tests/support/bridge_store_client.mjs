// Drives the bridge's own CallStore client for tests, from outside the package.
//
//   BRIDGE_DIR/bin/node bridge_store_client.mjs BRIDGE_DIR
//
// BRIDGE_DIR is the bridge vendored in an installed cursor-sdk (the directory above
// the path cursor_sdk._vendor.resolve_bridge_path() returns). Nothing of it is copied:
// its modules are imported from there at run time, so the code under test is exactly
// what that cursor-sdk ships:
//   dist/store-callback-config.js      setBridgeStoreCallbackConfig({url, authToken})
//   dist/bridge-local-agent-store.js   createCallbackLocalAgentStore(), the store a
//                                      bridge started with --local-store
//                                      '{"type":"custom"}' uses
//   node_modules/@cursor/sdk           createAgentPlatform({localStore}): the SDK's own
//                                      run and checkpoint bookkeeping over that store
//
// One JSON request a line on stdin, one JSON answer a line on stdout, in order:
//   {"op": "configure", "url": ..., "authToken": ..., "workspace": ...}
//   or, for the SDK's own built-in stores instead of the callback store:
//   {"op": "open-local", "kind": "sqlite", "stateRoot": ..., "workspace": ...}
//   {"op": "open-local", "kind": "jsonl", "rootDir": ..., "workspace": ...}
//     (dist/esm/sqlite.js: SqliteLocalAgentStore; index.js: JsonlLocalAgentStore)
//   {"op": "store", "substore": ..., "method": ..., "input": {...}}
//   {"op": "platform", "object": "store" | "checkpointStore", "method": ..., "args": [...]}
// Bytes cross this pipe as base64 under "bytes" keys (see toBridge / fromBridge); the
// bridge then does its own encoding. An answer is {"ok": result} or
// {"error": {"name", "code", "message"}}, code being the Connect code number of a
// ConnectError the bridge threw.

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const bridgeDir = process.argv[2];
if (!bridgeDir) {
  process.stderr.write("usage: node bridge_store_client.mjs BRIDGE_DIR\n");
  process.exit(2);
}
const load = (...parts) => import(pathToFileURL(join(bridgeDir, ...parts)).href);
const config = await load("dist", "store-callback-config.js");
const callbackStore = await load("dist", "bridge-local-agent-store.js");
const sdk = await load("node_modules", "@cursor", "sdk", "dist", "esm", "index.js");

let store;
let platform;

// {"bytes": base64} in a request becomes the Uint8Array the bridge API takes.
function toBridge(value) {
  if (Array.isArray(value)) return value.map(toBridge);
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "bytes") {
      return new Uint8Array(Buffer.from(value.bytes, "base64"));
    }
    if (keys.length === 1 && keys[0] === "binaryMessage") {
      // An opaque protobuf message, as saveCheckpoint takes it: only toBinary() is used.
      const bytes = new Uint8Array(Buffer.from(value.binaryMessage, "base64"));
      return { toBinary: () => bytes };
    }
    return Object.fromEntries(keys.map((key) => [key, toBridge(value[key])]));
  }
  return value;
}

// Bytes the bridge returns go back as {"bytes": base64}; Dates as ISO strings.
function fromBridge(value) {
  if (value instanceof Uint8Array) return { bytes: Buffer.from(value).toString("base64") };
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(fromBridge);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fromBridge(v)]));
  }
  return value === undefined ? null : value;
}

async function handle(request) {
  switch (request.op) {
    case "configure":
      config.setBridgeStoreCallbackConfig({ url: request.url, authToken: request.authToken });
      store = callbackStore.createCallbackLocalAgentStore();
      platform = await sdk.createAgentPlatform({
        localStore: store,
        workspaceRef: request.workspace,
      });
      return null;
    case "open-local":
      store =
        request.kind === "sqlite"
          ? await (
              await load("node_modules", "@cursor", "sdk", "dist", "esm", "sqlite.js")
            ).SqliteLocalAgentStore.open({
              workspaceRef: request.workspace,
              stateRoot: request.stateRoot,
            })
          : new sdk.JsonlLocalAgentStore(request.rootDir);
      platform = await sdk.createAgentPlatform({
        localStore: store,
        workspaceRef: request.workspace,
      });
      return null;
    case "store":
      return await store[request.substore][request.method](toBridge(request.input));
    case "platform": {
      const target = platform[request.object];
      return await target[request.method](...toBridge(request.args));
    }
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

function describe(error) {
  return {
    name: error?.name ?? "Error",
    code: typeof error?.code === "number" ? error.code : null,
    message: String(error?.rawMessage ?? error?.message ?? error),
  };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = { ok: fromBridge(await handle(JSON.parse(line))) };
  } catch (error) {
    answer = { error: describe(error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}

// A real MCP client (the official TypeScript SDK) driving the zooid mcp stdio
// bridge exactly as an agent would: it starts the bridge from the command and
// arguments of the session/new stdio entry, then initializes, lists the tools
// and calls every read tool. It prints one JSON line with what it got, so the
// Go test (interop_test.go) can judge it; it judges nothing itself.
//
// Usage: node client.mjs [--limit N] [--env KEY=VALUE]... -- COMMAND [ARG...]
// Exit status 0 with the JSON line on stdout, 2 for bad usage, 1 when the MCP
// exchange failed (the reason on stderr).

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

function usage(msg) {
  process.stderr.write(`client.mjs: ${msg}\nusage: node client.mjs [--limit N] [--env KEY=VALUE]... -- COMMAND [ARG...]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { limit: 5, env: {} };
  let i = 0;
  for (; i < argv.length && argv[i] !== '--'; i++) {
    if (argv[i] === '--limit') {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 1) usage(`--limit wants a positive integer, got ${argv[i]}`);
      opts.limit = n;
    } else if (argv[i] === '--env') {
      const kv = argv[++i] ?? '';
      const eq = kv.indexOf('=');
      if (eq < 1) usage(`--env wants KEY=VALUE, got ${kv}`);
      opts.env[kv.slice(0, eq)] = kv.slice(eq + 1);
    } else {
      usage(`unknown option ${argv[i]}`);
    }
  }
  const command = argv.slice(i + 1);
  if (i === argv.length || command.length === 0) usage('missing -- COMMAND');
  opts.command = command[0];
  opts.args = command.slice(1);
  return opts;
}

// The installed SDK version, read from its own package.json (the package's
// export map hides that file) so the report says which client really spoke.
function sdkVersion() {
  const url = new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // Like an ACP client, the SDK starts the server with its default safe
  // environment plus the entry's own variables.
  const transport = new StdioClientTransport({ command: opts.command, args: opts.args, env: opts.env, stderr: 'inherit' });
  // The SDK hands the negotiated version to transports that want it (HTTP
  // does); stdio does not, so catch it here instead of parsing the wire.
  let negotiated = null;
  transport.setProtocolVersion = (v) => {
    negotiated = v;
  };
  const client = new Client({ name: 'zooid-interop', version: '1.0.0' }, { capabilities: {} });
  const out = {
    sdk_version: sdkVersion(),
    requested_protocol_version: LATEST_PROTOCOL_VERSION,
    calls: [],
  };
  try {
    await client.connect(transport);
    out.protocol_version = negotiated;
    out.server_info = client.getServerVersion();
    out.server_capabilities = client.getServerCapabilities();
    out.instructions = client.getInstructions();

    const listed = await client.listTools();
    out.tools = listed.tools;

    // callTool validates structuredContent against each tool's outputSchema,
    // so a shape the SDK rejects fails here as a real agent would see it.
    const call = async (name, args) => {
      const res = await client.callTool({ name, arguments: args });
      const rec = { tool: name, arguments: args, is_error: res.isError === true, content: res.content };
      if (res.structuredContent !== undefined) rec.structured = res.structuredContent;
      out.calls.push(rec);
      return res;
    };
    const data = (res) => res.structuredContent ?? JSON.parse(res.content[0].text);

    const limit = opts.limit;
    const recent = data(await call('zooid_get_recent_threads', { limit }));
    // Prefer a thread with replies, so thread history has something to page.
    const thread = recent.threads.find((t) => t.reply_count > 0) ?? recent.threads[0];
    if (!thread) throw new Error('zooid_get_recent_threads returned no threads to read');
    const th = data(await call('zooid_get_thread_history', { thread_id: thread.id, limit }));
    if (th.has_more) {
      await call('zooid_get_thread_history', { thread_id: thread.id, limit, before: th.next_before });
    }
    const h1 = data(await call('zooid_get_history', { limit }));
    if (h1.has_more) {
      await call('zooid_get_history', { limit, before: h1.next_before });
    }
    await call('zooid_get_members', {});
    await call('zooid_get_room_info', {});
    await call('zooid_get_rooms', {});
    // Model mistakes must come back as tool results with isError, never as
    // JSON-RPC errors (which callTool would throw).
    await call('zooid_get_history', { limit, bogus: true });
    await call('zooid_get_thread_history', { thread_id: '$no-such-event:localhost' });
  } finally {
    await client.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err) => {
  process.stderr.write(`client.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});

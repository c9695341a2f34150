#!/usr/bin/env node
// A decree client on @grpc/grpc-js: submit a message (with an idempotency
// key), follow it to its end with WatchMessage while printing the routine's
// output live, then fetch changes.diff and run.json.
//
// Usage:
//   DECREE_CONTROLLER=127.0.0.1:7443 DECREE_TOKEN_FILE=client.token \
//     node client.js --routine develop --name fix-typo --body "Fix the typo" --out result.json
//
// The routine's output goes to standard output as it is produced; progress
// goes to standard error; --out receives a JSON summary (id, outcome,
// events, log, diff, run.json).
'use strict';

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

function parseArgs(argv) {
  const opts = { routine: '', name: '', body: '', out: '', protoDir: path.resolve(__dirname, '../../../proto') };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(key in opts) || i + 1 >= argv.length) {
      throw new Error(`unknown or incomplete option ${argv[i]}; use --routine, --name, --body, --out, --proto-dir`);
    }
    opts[key] = argv[i + 1];
  }
  return opts;
}

// The client token goes on every call as "authorization: Bearer <token>".
// Plain text is only for a controller on loopback started with --insecure;
// otherwise use grpc.credentials.createSsl(fs.readFileSync(caFile)).
function connect(protoDir) {
  const def = protoLoader.loadSync('decree/v1/controller.proto', {
    includeDirs: [protoDir], keepCase: false, longs: String, enums: String, defaults: true, oneofs: true,
  });
  const decree = grpc.loadPackageDefinition(def).decree.v1;
  const address = process.env.DECREE_CONTROLLER || '127.0.0.1:7443';
  const tokenFile = process.env.DECREE_TOKEN_FILE;
  const token = tokenFile ? fs.readFileSync(tokenFile, 'utf8').trim() : process.env.DECREE_TOKEN;
  if (!token) throw new Error('set DECREE_TOKEN_FILE (a file holding the client token) or DECREE_TOKEN');
  const meta = new grpc.Metadata();
  meta.set('authorization', `Bearer ${token}`);
  return { client: new decree.ControllerService(address, grpc.credentials.createInsecure()), meta };
}

function unary(c, method, req) {
  return new Promise((resolve, reject) => {
    c.client[method](req, c.meta, (err, resp) => (err ? reject(err) : resolve(resp)));
  });
}

// Follows one message; resumes from the last cursor if the stream breaks.
async function follow(c, id, onLog) {
  const result = { events: [], log: '', outcome: null };
  let cursor = '';
  for (let tries = 0; !result.outcome; tries++) {
    try {
      await new Promise((resolve, reject) => {
        const call = c.client.WatchMessage({ messageId: id, cursor }, c.meta);
        call.on('data', (r) => {
          cursor = r.cursor;
          if (r.event) {
            result.events.push(r.event.kind);
            process.stderr.write(`decree: ${id} ${r.event.kind}${r.event.text ? ': ' + r.event.text : ''}\n`);
          } else if (r.log) {
            const text = Buffer.from(r.log.data).toString('utf8');
            result.log += text;
            onLog(text);
          } else if (r.outcome) {
            result.outcome = r.outcome;
          }
        });
        call.on('end', resolve);
        call.on('error', reject);
      });
    } catch (err) {
      // UNAVAILABLE: the controller restarted; resume where we were.
      if (err.code !== grpc.status.UNAVAILABLE || tries >= 10) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  return result;
}

function artifact(c, id, name) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    const call = c.client.GetArtifact({ messageId: id, name }, c.meta);
    call.on('data', (r) => chunks.push(Buffer.from(r.data)));
    call.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    call.on('error', reject);
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const c = connect(opts.protoDir);
  const fields = opts.routine ? [{ key: 'routine', value: opts.routine }] : [];
  // One request_id per submission: a retry after a timeout cannot queue twice.
  const requestId = crypto.randomUUID();
  const req = { name: opts.name, body: Buffer.from(opts.body), fields, requestId };
  const sub = await unary(c, 'SubmitMessage', req);
  const again = await unary(c, 'SubmitMessage', req);
  if (again.message.id !== sub.message.id || !again.replayed) {
    throw new Error(`retried submit queued ${again.message.id}, first was ${sub.message.id}`);
  }
  const id = sub.message.id;
  process.stderr.write(`decree: queued ${sub.message.name} as ${id}\n`);
  const watched = await follow(c, id, (text) => process.stdout.write(text));
  const diff = await artifact(c, id, 'changes.diff');
  const runJson = JSON.parse(await artifact(c, id, 'run.json'));
  const summary = {
    id, chain: sub.message.chain, state: watched.outcome.state, reason: watched.outcome.reason,
    attempts: watched.outcome.attempts, events: watched.events, log: watched.log, diff, run: runJson,
  };
  if (opts.out) fs.writeFileSync(opts.out, JSON.stringify(summary, null, 2));
  process.stderr.write(`decree: ${id} ended ${watched.outcome.state}\n`);
  c.client.close();
  process.exitCode = watched.outcome.state === 'MESSAGE_STATE_DONE' ? 0 : 1;
}

main().catch((err) => {
  process.stderr.write(`decree client: ${err.code !== undefined ? grpc.status[err.code] + ': ' : ''}${err.details || err.message}\n`);
  process.exitCode = 2;
});

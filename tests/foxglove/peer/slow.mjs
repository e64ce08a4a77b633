// A client that subscribes like the app, then stops reading (its socket paused) after
// the first message: the server must cut it off. It prints {"paused": true}, waits for
// a line on stdin, reads again and prints how the connection ended.
import protocol from "@foxglove/ws-protocol";
import WebSocket from "ws";

const { FoxgloveClient } = protocol; // a CommonJS package: its exports hang off the default
import { createInterface } from "node:readline";

const plan = JSON.parse(process.argv[2]);
const wanted = new Set(plan.topics);
const ws = new WebSocket(plan.url, [plan.subprotocol]);
const client = new FoxgloveClient({ ws });
let received = 0;
let paused = false;

client.on("advertise", (channels) => {
  for (const c of channels) if (wanted.has(c.topic)) client.subscribe(c.id);
});
client.on("message", () => {
  received += 1;
  if (!paused) {
    paused = true;
    ws.pause();
    console.log(JSON.stringify({ paused: true }));
  }
});
client.on("close", (e) => {
  console.log(JSON.stringify({ closed: e?.code ?? null, received }));
  process.exit(0);
});
client.on("error", () => {});
createInterface({ input: process.stdin }).on("line", () => ws.resume());
setTimeout(() => process.exit(3), plan.planMs ?? 60000);

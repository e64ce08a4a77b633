// The independent client of the tests: the protocol's reference FoxgloveClient
// (@foxglove/ws-protocol) over a `ws` WebSocket, driven by a JSON plan (argv[2]).
// It prints one JSON object with what it saw, and exits 0 once the plan is done
// (3 when planMs ran out first, with what it saw so far).
import protocol from "@foxglove/ws-protocol";
import WebSocket from "ws";

const { FoxgloveClient } = protocol; // a CommonJS package: its exports hang off the default

const plan = JSON.parse(process.argv[2]);
const wanted = new Set(plan.topics ?? []);
const count = plan.count ?? 1;
const ws = new WebSocket(plan.url, [plan.subprotocol]);
const client = new FoxgloveClient({ ws });
const decoder = new TextDecoder();
const out = {
  protocol: null, serverInfo: null, channels: {}, messages: {}, services: {},
  graph: { published: {}, subscribed: {}, services: {} }, statuses: [], errors: [],
  callResponse: null, callFailure: null, callResponses: [], published: false, readvertised: 0,
};
const channels = new Map(); // channel id -> channel
const subscriptions = new Map(); // subscription id -> topic
let malformedSent = false;
// `call` is one call; `calls` several, each sent once the one before is answered.
if (plan.call) plan.calls = [plan.call];
let callsSent = 0;

let finished = false;
function finish(code) {
  if (finished) return;
  finished = true;
  out.done = code === 0;
  process.stdout.write(JSON.stringify(out) + "\n", () => {
    ws.close();
    process.exit(code);
  });
}
setTimeout(() => finish(3), plan.planMs ?? 30000);

function complete() {
  for (const topic of wanted) {
    if ((out.messages[topic] ?? []).length < count) return false;
  }
  if (plan.graph && !plan.graph.every((t) => (out.graph.published[t] ?? []).length > 0)) {
    return false;
  }
  if (plan.calls && out.callResponses.length < plan.calls.length) return false;
  if (plan.publish && !out.published) return false;
  if (plan.channels && !plan.channels.every((t) => out.channels[t])) return false;
  if (plan.malformed) {
    const errors = out.statuses.filter((s) => s.level === 2).length;
    if (errors < plan.malformed.length) return false;
  }
  return true;
}
function check() {
  if (complete()) finish(0);
}
function allSubscribed() {
  const subscribed = new Set(subscriptions.values());
  return [...wanted].every((t) => subscribed.has(t));
}
function maybePublish() {
  if (!plan.publish || out.published || !allSubscribed()) return;
  const id = client.advertise({ topic: plan.publish.topic, encoding: "json", schemaName: "go" });
  client.sendMessage(id, new TextEncoder().encode(plan.publish.body));
  out.published = true;
}
function maybeCall() {
  if (!plan.calls || callsSent >= plan.calls.length) return;
  if (callsSent > out.callResponses.length) return; // the one before is not answered yet
  const call = plan.calls[callsSent];
  const service = Object.values(out.services).find((s) => s.name === call.service);
  if (!service) return;
  client.sendServiceCallRequest({
    serviceId: service.id, callId: 7 + callsSent, encoding: "json",
    data: new TextEncoder().encode(call.body),
  });
  callsSent += 1;
}

client.on("open", () => { out.protocol = ws.protocol; });
client.on("error", (e) => out.errors.push(String(e?.message ?? e)));
client.on("close", (e) => { out.closed = e?.code ?? null; finish(3); });
client.on("serverInfo", (info) => {
  out.serverInfo = info;
  if (plan.graph) client.subscribeConnectionGraph();
  if (plan.malformed && !malformedSent) {
    malformedSent = true;
    for (const frame of plan.malformed) {
      ws.send(frame.text !== undefined ? frame.text : Buffer.from(frame.hex, "hex"));
    }
  }
  check();
});
client.on("status", (s) => { out.statuses.push(s); check(); });
client.on("advertise", (advertised) => {
  for (const channel of advertised) {
    if (out.channels[channel.topic]) out.readvertised += 1;
    channels.set(channel.id, channel);
    out.channels[channel.topic] = channel;
    if (wanted.has(channel.topic) && channel.topic !== plan.publish?.topic) {
      const id = client.subscribe(channel.id);
      subscriptions.set(id, channel.topic);
    }
  }
  maybePublish();
  check();
});
client.on("unadvertise", (ids) => {
  for (const id of ids) channels.delete(id);
});
client.on("message", ({ subscriptionId, timestamp, data }) => {
  const topic = subscriptions.get(subscriptionId);
  if (topic === undefined) {
    out.errors.push(`message for unknown subscription ${subscriptionId}`);
    return;
  }
  const text = decoder.decode(data);
  // The participant's `ready` messages, before the numbered ones: not counted.
  if ((plan.ignore ?? []).some((word) => text.includes(word))) return;
  const list = (out.messages[topic] ??= []);
  if (list.length < count) list.push({ t: timestamp.toString(), data: text });
  check();
});
client.on("advertiseServices", (services) => {
  for (const s of services) out.services[s.id] = s;
  maybeCall();
});
client.on("serviceCallResponse", (r) => {
  out.callResponse = { callId: r.callId, encoding: r.encoding, data: decoder.decode(r.data) };
  out.callResponses.push(out.callResponse);
  maybeCall();
  check();
});
client.on("serviceCallFailure", (f) => {
  out.callFailure = f;
  out.callResponses.push(f);
  maybeCall();
  check();
});
client.on("connectionGraphUpdate", (g) => {
  for (const { name, publisherIds } of g.publishedTopics) out.graph.published[name] = publisherIds;
  for (const { name, subscriberIds } of g.subscribedTopics) out.graph.subscribed[name] = subscriberIds;
  for (const { name, providerIds } of g.advertisedServices) out.graph.services[name] = providerIds;
  for (const name of g.removedTopics) {
    delete out.graph.published[name];
    delete out.graph.subscribed[name];
  }
  for (const name of g.removedServices) delete out.graph.services[name];
  check();
});

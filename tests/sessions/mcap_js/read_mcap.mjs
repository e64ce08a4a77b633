// Reads an MCAP file with @mcap/core, the reader Foxglove's apps use, through its
// summary and chunk index; prints per topic the message count, the log times and the
// parsed JSON data (what a Plot panel would take), as one JSON object on stdout.
import { open } from "node:fs/promises";
import { McapIndexedReader } from "@mcap/core";
import { decompress } from "fzstd";

const handle = await open(process.argv[2], "r");
const readable = {
  size: async () => BigInt((await handle.stat()).size),
  read: async (offset, size) => {
    const buffer = new Uint8Array(Number(size));
    await handle.read(buffer, 0, Number(size), Number(offset));
    return buffer;
  },
};
const reader = await McapIndexedReader.Initialize({
  readable,
  decompressHandlers: { zstd: (data, size) => decompress(data, new Uint8Array(Number(size))) },
});
const topics = {};
for (const channel of reader.channelsById.values()) {
  const schema = reader.schemasById.get(channel.schemaId);
  topics[channel.topic] = {
    encoding: channel.messageEncoding,
    schemaEncoding: schema?.encoding ?? "",
    schema: schema ? JSON.parse(new TextDecoder().decode(schema.data)) : null,
    messages: [],
  };
}
const decoder = new TextDecoder("utf-8", { fatal: true });
for await (const message of reader.readMessages({ validateCrcs: true })) {
  const topic = reader.channelsById.get(message.channelId).topic;
  topics[topic].messages.push([
    message.logTime.toString(),
    message.publishTime.toString(),
    JSON.parse(decoder.decode(message.data)),
  ]);
}
await handle.close();
process.stdout.write(JSON.stringify({ topics }));

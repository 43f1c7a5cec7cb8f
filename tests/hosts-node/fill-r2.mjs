// Fill wrangler's local R2 simulation with the objects of a published bucket:
//
//   node fill-r2.mjs PERSIST_TO BUCKET MANIFEST.json
//
// MANIFEST.json lists {key, file, contentType, cacheControl} objects.
// `wrangler dev --persist-to PERSIST_TO` then serves a Worker over them.
// The local simulation has no S3 interface for --publish to write to, and
// `wrangler r2 object put --local` starts a Miniflare per object (2 s each):
// this is the same put, through Miniflare's own R2 binding, in the place
// wrangler keeps its local state (PERSIST_TO/v3, as `--persist-to` does),
// every object with its own metadata, in one process.
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { Miniflare } from "miniflare";

const [persistTo, bucketName, manifest] = process.argv.slice(2);
const objects = JSON.parse(await readFile(manifest, "utf-8"));
const mf = new Miniflare({
  modules: true,
  script: "export default { fetch() { return new Response(null, { status: 404 }); } }",
  defaultPersistRoot: join(resolve(persistTo), "v3"),
  r2Buckets: { BUCKET: bucketName },
});
try {
  const bucket = await mf.getR2Bucket("BUCKET");
  for (const { key, file, contentType, cacheControl } of objects) {
    // A Node Buffer may share its memory with others: the proxy wants its own.
    const body = new Uint8Array(await readFile(file));
    await bucket.put(key, body, { httpMetadata: { contentType, cacheControl } });
  }
  console.log(`${objects.length} objects in ${bucketName}`);
} finally {
  await mf.dispose();
}

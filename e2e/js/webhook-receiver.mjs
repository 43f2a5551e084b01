// A webhook receiver for e2e/webhooks_test.go: it verifies every delivery
// with the npm standardwebhooks package (the Standard Webhooks reference
// library), answers 204 to a verified one and 400 to any other, and
// appends one JSON line per request to the file it is given:
// {"ok": true, "id", "type", "taskId", "payload"} or {"ok": false, "why"}.
//
//   WEBHOOK_SECRET=whsec_… node webhook-receiver.mjs PORT FILE
//
// It prints "listening PORT" once it listens on 127.0.0.1.
import http from "node:http";
import fs from "node:fs";
import { Webhook } from "standardwebhooks";

const [port, file] = process.argv.slice(2);
const wh = new Webhook(process.env.WEBHOOK_SECRET);

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    let line;
    try {
      // verify checks webhook-id, webhook-timestamp (5 minutes' tolerance)
      // and webhook-signature, and returns the parsed payload.
      const payload = wh.verify(body, req.headers);
      line = { ok: true, id: req.headers["webhook-id"], type: payload.type, taskId: payload.data.taskId, payload };
      res.statusCode = 204;
    } catch (e) {
      line = { ok: false, why: String(e && e.message ? e.message : e) };
      res.statusCode = 400;
    }
    fs.appendFileSync(file, JSON.stringify(line) + "\n");
    res.end();
  });
});
server.listen(Number(port), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});

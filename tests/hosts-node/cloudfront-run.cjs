// Run a CloudFront Function on CloudFront-shaped events, in node:
//
//   node cloudfront-run.cjs FUNCTION.js
//
// Each line of standard input is an event; each runs in a fresh context holding
// only the function's code, as CloudFront runs it (no require, no process, no
// timers), and what it returns (a request or a response) is written as JSON on a
// line of its own.
"use strict";
const fs = require("node:fs");
const readline = require("node:readline");
const vm = require("node:vm");

const code = fs.readFileSync(process.argv[2], "utf-8");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const context = vm.createContext({});
  vm.runInContext(code, context, { filename: process.argv[2] });
  context.event = JSON.parse(line);
  const result = vm.runInContext("handler(event)", context, { timeout: 1000 });
  process.stdout.write(JSON.stringify(result) + "\n");
});

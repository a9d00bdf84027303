"use strict";
// The hidden tests: a CTRF report and reward.txt (1 when every case passes).
const fs = require("fs");
const { slugify } = require("/app/slugify.js");

const cases = [
  ["Hello World", "hello-world"],
  ["  Hello,   World! ", "hello-world"],
  ["already-a-slug", "already-a-slug"],
  ["C++ & Rust 2024", "c-rust-2024"],
];
if (Number(process.env.SLUG_CASES) !== cases.length) {
  throw new Error("verifier.env did not reach the verifier");
}
const tests = cases.map(([input, want]) => {
  let got;
  try {
    got = slugify(input);
  } catch (err) {
    got = String(err);
  }
  const status = got === want ? "passed" : "failed";
  console.log(`${status}: slugify(${JSON.stringify(input)}) = ${JSON.stringify(got)}`);
  return { name: `slugify ${JSON.stringify(input)}`, status };
});
const passed = tests.filter((t) => t.status === "passed").length;
fs.writeFileSync("/logs/verifier/ctrf.json", JSON.stringify({ results: { tests } }));
fs.writeFileSync("/logs/verifier/reward.txt", passed === tests.length ? "1\n" : "0\n");

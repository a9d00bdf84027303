import { describe, expect, test } from "vitest";

const add = (a, b) => a + b;

describe("add", () => {
  test("adds good", () => {
    expect(add(1, 2)).toBe(3);
  });

  test("adds bad", () => {
    expect(add(2, 2)).toBe(5);
  });
});

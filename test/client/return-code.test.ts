import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RETURN_CODE_VERSION, ReturnCodeError, makeReturnCode, parseReturnCode } from "../../src/client/index.ts";
import { isHeaderText } from "../../src/client/header-text.ts";
import { headerText } from "../../src/shared/schemas.ts";

const printable = fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code));
const visible = fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code));

/** Any ID a header carries unchanged: 1–256 printable ASCII, no space at either end. */
const anyId = fc.oneof(
  visible,
  fc
    .tuple(visible, fc.string({ unit: printable, maxLength: 254 }), visible)
    .map(([first, middle, last]) => first + middle + last),
);
const receiptId = fc.oneof(fc.uuid({ version: 7 }), anyId);
const ids = fc.record({ receiptId, appUserId: anyId });

/** Strings near the format: its alphabet, its separator, its prefix, and what must not be in it. */
const nearCode = fc.oneof(
  fc.string({ unit: fc.constantFrom("R", "C", "1", "2", ".", "A", "Q", "g", "w", "-", "_", "=", "+", "/", " ", "\n") }),
  ids.map(makeReturnCode).chain((code) =>
    fc.tuple(fc.nat({ max: code.length }), fc.nat({ max: 3 }), fc.constantFrom("", ".", "=", "A", "+", " ", "\u00e9")).map(
      ([at, cut, insert]) => code.slice(0, at) + insert + code.slice(at + cut),
    ),
  ),
);

describe("return code: round trip over every allowed ID", () => {
  it("parse(make(ids)) gives the IDs back", () => {
    fc.assert(
      fc.property(ids, (value) => {
        expect(parseReturnCode(makeReturnCode(value))).toEqual(value);
      }),
    );
  });

  it("the code is RC1 and two base64url parts: URL-safe, with nothing to escape", () => {
    fc.assert(
      fc.property(ids, (value) => {
        const code = makeReturnCode(value);
        expect(code).toMatch(/^RC1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
        expect(encodeURIComponent(code)).toBe(code);
      }),
    );
  });

  it("unambiguous: any text parse accepts is the one code of the IDs it holds", () => {
    fc.assert(
      fc.property(fc.oneof(nearCode, fc.string()), (text) => {
        let parsed;
        try {
          parsed = parseReturnCode(text);
        } catch (error) {
          expect(error).toBeInstanceOf(ReturnCodeError);
          return;
        }
        expect(makeReturnCode(parsed)).toBe(text);
      }),
      { numRuns: 2000 },
    );
  });

  it("the client's ID rule accepts only what the Worker's headerText accepts, and all of it but edge spaces", () => {
    const candidate = fc.oneof(anyId, fc.string({ maxLength: 260 }), fc.string({ unit: printable, maxLength: 260 }));
    fc.assert(
      fc.property(candidate, (text) => {
        const worker = headerText.safeParse(text).success;
        expect(isHeaderText(text)).toBe(worker && text === text.trim());
      }),
    );
  });

  it("reads the example of docs/api.md", () => {
    const code = "RC1.MDE5YWE4YTQtM2MxZS03ZDJiLTlmNDEtNmMwZTViMmQ4YTE3.YXUtN2YzYzll";
    expect(parseReturnCode(code)).toEqual({ receiptId: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17", appUserId: "au-7f3c9e" });
    expect(RETURN_CODE_VERSION).toBe("RC1");
  });

  it("holds the longest IDs: 256 characters each", () => {
    const value = { receiptId: "~".repeat(256), appUserId: "!".repeat(256) };
    expect(parseReturnCode(makeReturnCode(value))).toEqual(value);
  });
});

describe("return code: malformed input is refused with a clear error", () => {
  const good = makeReturnCode({ receiptId: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17", appUserId: "au-7f3c9e" });
  const [, receiptPart, appUserPart] = good.split(".");
  const cases: [string, string, RegExp][] = [
    ["empty text", "", /must start with "RC1\."/],
    ["another kind of QR code", "https://example.com/offer", /must start with "RC1\."/],
    ["a lower-case prefix", good.toLowerCase(), /must start with "RC1\."/],
    ["an unknown version", `RC2.${receiptPart}.${appUserPart}`, /version RC2 is not supported/],
    ["the prefix alone", "RC1", /3 parts/],
    ["a missing part", `RC1.${receiptPart}`, /3 parts/],
    ["an extra part", `${good}.${appUserPart}`, /3 parts/],
    ["an empty part", `RC1..${appUserPart}`, /receiptId part .* not base64url/],
    ["padding", `RC1.${receiptPart}.${appUserPart}==`, /appUserId part .* not base64url/],
    ["standard base64 characters", `RC1.${receiptPart}.YXU+N2YzYzll`, /appUserId part .* not base64url/],
    ["white space around it", `${good}\n`, /appUserId part .* not base64url/],
    ["a length no base64 has", `RC1.${receiptPart}.YXUtN`, /appUserId part .* not base64url/],
    // "au-1" is YXUtMQ: the last character carries 4 unused bits, which a lenient decoder ignores.
    ["unused bits set (a second spelling)", `RC1.${receiptPart}.YXUtMR`, /not in its canonical spelling/],
    ["an ID with a control character", `RC1.${receiptPart}.${base64url("au\t1")}`, /appUserId must be 1–256 printable ASCII/],
    ["an ID beyond ASCII", `RC1.${receiptPart}.${base64url("caf\u00e9")}`, /appUserId must be 1–256 printable ASCII/],
    ["an ID with a space at its end", `RC1.${receiptPart}.${base64url("au-1 ")}`, /appUserId must be 1–256 printable ASCII/],
    ["an ID over 256 characters", `RC1.${base64url("r".repeat(257))}.${appUserPart}`, /receiptId must be 1–256 printable ASCII/],
    ["an absurdly long text", `RC1.${"A".repeat(10_000)}.${appUserPart}`, /at most 689 characters/],
  ];

  it.each(cases)("%s", (_label, text, reason) => {
    expect(() => parseReturnCode(text)).toThrow(ReturnCodeError);
    expect(() => parseReturnCode(text)).toThrow(reason);
  });

  it("refuses a value that is not a string", () => {
    expect(() => parseReturnCode(42 as unknown as string)).toThrow(ReturnCodeError);
  });

  it.each([
    ["an empty ID", { receiptId: "", appUserId: "au-1" }, /receiptId/],
    ["only spaces", { receiptId: "r-1", appUserId: "   " }, /appUserId/],
    ["a leading space", { receiptId: " r-1", appUserId: "au-1" }, /receiptId/],
    ["a tab", { receiptId: "r-1", appUserId: "au\t1" }, /appUserId/],
    ["a non-ASCII character", { receiptId: "r-\u00e9", appUserId: "au-1" }, /receiptId/],
    ["257 characters", { receiptId: "r-1", appUserId: "a".repeat(257) }, /appUserId/],
  ])("makeReturnCode refuses %s, which no header could carry", (_label, value, name) => {
    expect(() => makeReturnCode(value)).toThrow(ReturnCodeError);
    expect(() => makeReturnCode(value)).toThrow(name);
  });
});

// Written apart from the client's encoder, so that these cases do not lean on the code under test.
function base64url(latin1: string): string {
  return btoa(latin1).replace(/=+$/, "").replaceAll("+", "-").replaceAll("/", "_");
}

/**
 * DR Retail amounts into minor units (docs/api.md#dr-retail-mapping): from the number's own digits,
 * exactly, or refused with the reason; and the card numbers add refuses (docs/api.md#dr-retail-people).
 */
import { describe, expect, it } from "vitest";
import { minorUnitDecimals, minorUnitsOf } from "../../src/api/dr-retail-mapping.ts";
import { isFullCardNumber } from "../../src/shared/dr-retail.ts";

describe("docs/api.md#dr-retail DR Retail amounts in minor units, exactly", () => {
  it.each([
    ["41.10", 2, 4110n],
    ["0.29", 2, 29n],
    ["-0.5", 2, -50n],
    ["4.11e1", 2, 4110n],
    ["1E+2", 2, 10000n],
    ["1e-2", 2, 1n],
    ["2344.500", 2, 234450n],
    ["1280", 0, 1280n],
    ["1.234", 3, 1234n],
    ["0", 2, 0n],
    ["0e400", 2, 0n],
    ["90071992547409.91", 2, 9007199254740991n],
  ] as const)("%s with %i decimals is %s", (text, decimals, minor) => {
    expect(minorUnitsOf(text, decimals)).toBe(minor);
  });

  it.each([
    ["1.005", 2, "has more than 2 decimals, the minor unit of its currency"],
    ["54.9", 0, "has more than 0 decimals, the minor unit of its currency"],
    ["1e-500", 2, "has more than 2 decimals, the minor unit of its currency"],
    ["90071992547409.92", 2, "is larger than 9007199254740991 minor units"],
    ["1e300", 2, "is larger than 9007199254740991 minor units"],
  ] as const)("%s with %i decimals is refused: %s", (text, decimals, reason) => {
    expect(minorUnitsOf(text, decimals)).toBe(reason);
  });

  it("knows the minor units of ISO 4217's currencies that have other than 2, in any case", () => {
    expect([minorUnitDecimals("SEK"), minorUnitDecimals("jpy"), minorUnitDecimals("KWD"), minorUnitDecimals("CLF"), minorUnitDecimals("XYZ")]).toEqual([2, 0, 3, 4, 2]);
  });
});

describe("docs/api.md#dr-retail a full card number is 12–19 digits that pass the Luhn check", () => {
  it.each([
    ["4111111111111111", true],
    ["4111 1111 1111 1111", true],
    ["4111-1111-1111-1111", true],
    ["5275000000007651", false],
    ["527500******7651", false],
    ["************3602", false],
    ["4111111111111112", false],
    ["79927398713", false],
    ["", false],
  ] as const)("%s: %s", (value, full) => {
    expect(isFullCardNumber(value)).toBe(full);
  });
});

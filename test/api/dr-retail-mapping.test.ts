/**
 * DR Retail amounts into minor units (docs/api.md#dr-retail-mapping): from the number's own digits,
 * exactly, or refused with the reason; and the card numbers add refuses or masks (docs/api.md#dr-retail-people).
 */
import { describe, expect, it } from "vitest";
import { minorUnitDecimals, minorUnitsOf } from "../../src/api/dr-retail-mapping.ts";
import { holdsCardNumberInText, isFullCardNumber, maskCardNumbersInJson, maskCardNumbersInText } from "../../src/shared/card-numbers.ts";

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
    ["4111\u20101111\u20101111\u20101111", true],
    ["4111.1111.1111.1111", true],
    ["４１１１１１１１１１１１１１１１", true],
    ["٤١١١١١١١١١١١١١١١", true],
    ["𝟒𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏𝟏", true],
    ["00004111111111111111", true],
    ["4111111111111111A", true],
    ["41111111****0002", false],
    ["411111XXXXXX1111", false],
  ] as const)("%s: %s", (value, full) => {
    expect(isFullCardNumber(value)).toBe(full);
  });
});

describe("docs/api.md#card-numbers free text holds a full card number only where one stands written as such", () => {
  it.each([
    ["4111111111111111", true],
    ["Paid with 4111 1111 1111 1111, thanks", true],
    ["Amex 3782 822463 10005", true],
    ["2221000000000009", true],
    ["４１１１－１１１１－１１１１－１１１１", true],
    ["4111  1111 1111 1111", false],
    ["EAN 4006381333924", false],
    ["+49 1512 3456704", false],
    ["2026112200427000108", false],
    ["1111222233334444", false],
    ["7350001234567", false],
    ["a4111111111111111", false],
    ["527500******7651", false],
    // The edges of the one-pass search that comes first: 13 digits, any script's, one separator of each kind.
    ["4222222222222", true],
    ["422222222222", false],
    ["Card 4222 2222 2222 2 ok", true],
    ["𝟒𝟏𝟏𝟏 𝟏𝟏𝟏𝟏 𝟏𝟏𝟏𝟏 𝟏𝟏𝟏𝟏", true],
    ["4111\u00a01111\u00a01111\u00a01111", true],
    ["4111\u20131111\u20131111\u20131111", true],
  ] as const)("%s: %s", (value, full) => {
    expect(holdsCardNumberInText(value)).toBe(full);
  });
});

describe("docs/api.md#card-numbers a card number in free text is masked: its first six and last four digits kept, as written", () => {
  it.each([
    ["Fakturanr: 2260 6633 2099 9960", "Fakturanr: 2260 66** **** 9960"],
    ["4111111111111111", "411111******1111"],
    ["Amex 3782 822463 10005", "Amex 3782 82**** *0005"],
    ["４１１１－１１１１－１１１１－１１１１", "４１１１－１１**－****－１１１１"],
    ["4111 1111 1111 1111 and 5555-5555-5555-4444", "4111 11** **** 1111 and 5555-55**-****-4444"],
    ["EAN 4006381333924, +49 1512 3456704", "EAN 4006381333924, +49 1512 3456704"],
    ["527500******7651", "527500******7651"],
  ] as const)("%s", (value, masked) => {
    expect(maskCardNumbersInText(value)).toBe(masked);
    expect(holdsCardNumberInText(masked)).toBe(false);
    expect(isFullCardNumber(masked)).toBe(false);
  });

  it("a JSON text loses its card numbers and nothing else: every other byte as written, escapes and names included", () => {
    const text = '{"n\\u0061me":"Oat \\u00b7 milk","note":"kort \\u0034111 1111 1111 1111 \\u00b7 ok","keep":"4006381333924"}';
    expect(maskCardNumbersInJson(text)).toBe('{"n\\u0061me":"Oat \\u00b7 milk","note":"kort 4111 11** **** 1111 · ok","keep":"4006381333924"}');
  });

  it("a card-number field refuses what free text would mask, however the rest of the field runs on", () => {
    expect(isFullCardNumber("4111 1111 1111 1111, 12/28")).toBe(true);
  });
});

/**
 * The return code: the text of the app's return QR code, which carries a receipt's ID and its
 * app user's ID to the till (docs/api.md#resources). docs/api.md "Return code" is its specification:
 *
 *     RC1.<base64url(receipt_id)>.<base64url(app_user_id)>
 *
 * `RC1` names the format's version. base64url without padding holds no ".", so the three parts
 * split unambiguously whatever the IDs hold, and every character is URL-safe (RFC 3986
 * unreserved): the code can stand in a URL's path or query without escaping.
 */
import { MAX_HEADER_TEXT, isHeaderText } from "./header-text.ts";

/** The version prefix of this format; a future format gets another (`RC2`). */
export const RETURN_CODE_VERSION = "RC1";

/** The two IDs a return code carries. */
export interface ReturnCodeIds {
  /** The receipt's ID as add answered it (a UUIDv7). */
  receiptId: string;
  /** The app user's internal ID, as the till sends it in app_user_id. */
  appUserId: string;
}

/** A return code that cannot be made or read; the message says why. */
export class ReturnCodeError extends Error {
  override name = "ReturnCodeError";
}

/**
 * Makes the return code for a receipt and its app user.
 *
 * @throws ReturnCodeError when an ID could not be sent as a header: it must be 1–256 printable
 *   ASCII characters, without a space at either end (HTTP would strip it).
 * @example makeReturnCode({ receiptId: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17", appUserId: "au-7f3c9e" })
 *   // "RC1.MDE5YWE4YTQtM2MxZS03ZDJiLTlmNDEtNmMwZTViMmQ4YTE3.YXUtN2YzYzll"
 */
export function makeReturnCode(ids: ReturnCodeIds): string {
  return [RETURN_CODE_VERSION, encodeId("receiptId", ids.receiptId), encodeId("appUserId", ids.appUserId)].join(".");
}

/**
 * Reads a return code as the till scanned it. Only the exact text `makeReturnCode` makes is
 * accepted: no white space around it (strip a scanner's line ending first), no padding, no
 * other spelling of the same bytes.
 *
 * @throws ReturnCodeError naming what is malformed.
 */
export function parseReturnCode(text: string): ReturnCodeIds {
  if (typeof text !== "string") throw new ReturnCodeError("A return code is a string.");
  if (text.length > MAX_CODE_LENGTH) {
    throw new ReturnCodeError(`A return code has at most ${MAX_CODE_LENGTH} characters; this one has ${text.length}.`);
  }
  const parts = text.split(".");
  const [version = "", receiptPart = "", appUserPart = ""] = parts;
  if (version !== RETURN_CODE_VERSION) {
    throw new ReturnCodeError(
      /^RC[0-9]+$/.test(version) && parts.length > 1
        ? `Return code version ${version} is not supported; this client reads ${RETURN_CODE_VERSION}.`
        : `Not a return code: it must start with "${RETURN_CODE_VERSION}.".`,
    );
  }
  if (parts.length !== 3) {
    throw new ReturnCodeError(`A return code has 3 parts separated by ".", not ${parts.length}.`);
  }
  return { receiptId: decodeId("receiptId", receiptPart), appUserId: decodeId("appUserId", appUserPart) };
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;
const MAX_CODE_LENGTH = RETURN_CODE_VERSION.length + 2 * (1 + Math.ceil((MAX_HEADER_TEXT * 4) / 3));

function encodeId(name: keyof ReturnCodeIds, id: string): string {
  checkUsable(name, id);
  // btoa reads each character as one byte, which every printable ASCII character is.
  return btoa(id).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function decodeId(name: keyof ReturnCodeIds, part: string): string {
  // A length of 4n+1 is no base64 at all: one character holds only 6 of a byte's 8 bits.
  if (!BASE64URL.test(part) || part.length % 4 === 1) {
    throw new ReturnCodeError(`The ${name} part of the return code is not base64url text.`);
  }
  const id = atob(part.replaceAll("-", "+").replaceAll("_", "/"));
  checkUsable(name, id);
  // Unused low bits in the last character let several texts spell one ID; only one is the code.
  if (encodeId(name, id) !== part) {
    throw new ReturnCodeError(`The ${name} part of the return code is not in its canonical spelling.`);
  }
  return id;
}

function checkUsable(name: keyof ReturnCodeIds, id: unknown): void {
  if (!isHeaderText(id)) {
    throw new ReturnCodeError(
      `The ${name} must be 1–${MAX_HEADER_TEXT} printable ASCII characters without a space at either end, as a header carries it.`,
    );
  }
}

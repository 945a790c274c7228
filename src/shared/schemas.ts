/**
 * The schemas that validate requests. They are the single source for the Worker's checks, the
 * OpenAPI document and the typed POS client: add a header or field here, nowhere else.
 * zod/mini keeps the Worker small: the classic API would add about 90 KiB gzip to a cold start.
 */
import * as z from "zod/mini";

const printableAscii = /^[\x20-\x7E]*$/;

/**
 * A header value usable as a string (contract §1): present values that are empty, longer than
 * 256 characters, or hold anything but printable ASCII are refused with 406.
 */
export const headerText = z.string().check(
  z.maxLength(256, "is longer than 256 characters"),
  z.regex(printableAscii, "holds control or non-ASCII characters"),
  z.refine((value) => value.trim() !== "", "is empty"),
);

/** `Authorization` is exempt from the length rule: an over-long token is simply invalid (403). */
export const authorizationHeader = z.string().check(
  z.regex(printableAscii, "holds control or non-ASCII characters"),
  z.refine((value) => value.trim() !== "", "is empty"),
  z.meta({ description: "Bearer <ACCESS_TOKEN>, the token from login", example: "Bearer eyJhbGciOiJIUzI1NiIs..." }),
);

/** A header value with its documentation. */
function documentedHeader(description: string, example?: string) {
  return headerText.check(z.meta(example === undefined ? { description } : { description, example }));
}

export const clientIdHeader = documentedHeader("Client ID issued by the operator", "pos-acme-01");

/** Headers of `POST /receipts/v2/login` (seed §4.1). */
export const loginHeaders = z.object({
  client_id: clientIdHeader,
  client_secret: documentedHeader("Client secret issued by the operator"),
  token_type: documentedHeader("Must be Bearer", "Bearer"),
  scope: documentedHeader("Must be service.pos", "service.pos"),
});
export type LoginHeaders = z.infer<typeof loginHeaders>;

/** Success body of login. */
export const loginResponse = z.object({
  data: z.object({
    access_token: z.string(),
    expires_in: z.literal(3600),
    token_type: z.literal("Bearer"),
  }),
  status: z.literal("OK"),
  status_code: z.literal(200),
});
export type LoginResponse = z.infer<typeof loginResponse>;

/** The body of every error response (seed §7). */
export const errorResponse = z.object({
  message: z.string(),
  status: z.string(),
  status_code: z.int(),
});
export type ErrorResponse = z.infer<typeof errorResponse>;

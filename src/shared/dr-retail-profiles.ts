/**
 * The versions of Kivra's DR Retail that add reads, by the `profile` parameter of Content-Type
 * (docs/api.md#dr-retail), and the names receipts in them are stored and pushed under. Free of
 * zod, so that the POS client can name them without carrying the rules.
 */

/** The versions add reads, by the `profile` parameter of Content-Type: each version's schema `$id`. */
export const DR_RETAIL_PROFILES = {
  "https://se.digitalreceipts.net/schemas/json/retail/v1.0": "1.0",
  "https://se.receipts.kivra.com/schemas/json/retail/v1.1": "1.1",
} as const;

/** A DR Retail version add reads. */
export type DrRetailVersion = (typeof DR_RETAIL_PROFILES)[keyof typeof DR_RETAIL_PROFILES];

/** The stored and pushed name of a receipt's format, e.g. `dr-retail/v1.1` (docs/api.md#dr-retail). */
export type DrRetailFormat = `dr-retail/v${DrRetailVersion}`;

/** The format name of a version. */
export function drRetailFormat(version: DrRetailVersion): DrRetailFormat {
  return `dr-retail/v${version}`;
}

/** The formats a stored receipt can have besides our own shape. */
export const DR_RETAIL_FORMATS = Object.values(DR_RETAIL_PROFILES).map(drRetailFormat);

/** The Content-Type that sends a body in DR Retail of `version`, with its profile. */
export function drRetailContentType(version: DrRetailVersion): string {
  const [profile] = Object.entries(DR_RETAIL_PROFILES).find(([, each]) => each === version)!;
  return `application/json;profile=${profile}`;
}

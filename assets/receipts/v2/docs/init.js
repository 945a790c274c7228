// Starts Swagger UI on the page /receipts/v2/docs serves. A file rather than an inline script, so
// that the page's Content-Security-Policy can forbid inline scripts altogether.
window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#reference",
  deepLinking: true,
  // Swagger UI would otherwise send the document to a public validator and show its badge.
  validatorUrl: null,
  // Every operation open, so that a reader (and a search in the page) sees every header and example.
  docExpansion: "full",
  defaultModelsExpandDepth: 0,
});

// Starts Swagger UI on the document this server publishes. A file of its own (no inline
// script), so that /docs runs under a Content-Security-Policy without 'unsafe-inline' scripts;
// validatorUrl null: the page asks no third-party validator about the document.
window.ui = SwaggerUIBundle({ url: "/v1/openapi.json", dom_id: "#swagger-ui", deepLinking: true, validatorUrl: null });

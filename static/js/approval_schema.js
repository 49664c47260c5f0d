// The check of edited tool arguments against the tool's JSON schema, before an approval set leaves the browser
// (approvals.js). The server checks everything again. No DOM.

export const typeOf = (value) => {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
};

const typeMatches = (expected, actual) =>
  expected === actual || (expected === "number" && actual === "integer");

const resolve = (schema, root) => {
  if (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/")) {
    return schema.$ref.slice(2).split("/").reduce((node, key) => (node ? node[key] : undefined), root) || {};
  }
  return schema || {};
};

// The subset of JSON Schema that pydantic emits for tool parameters; anything else is left to the server.
export const validate = (value, schemaIn, root, path, errors) => {
  const schema = resolve(schemaIn, root);
  const where = path || "arguments";
  if (Array.isArray(schema.anyOf) || Array.isArray(schema.oneOf)) {
    const options = schema.anyOf || schema.oneOf;
    if (!options.some((option) => { const e = []; validate(value, option, root, path, e); return e.length === 0; })) {
      errors.push(`${where}: does not match any allowed form`);
    }
    return;
  }
  if (Array.isArray(schema.allOf)) schema.allOf.forEach((part) => validate(value, part, root, path, errors));
  const actual = typeOf(value);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeMatches(t, actual))) {
      errors.push(`${where}: expected ${types.join(" or ")}, got ${actual}`);
      return;
    }
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) errors.push(`${where}: must be ${JSON.stringify(schema.const)}`);
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    errors.push(`${where}: must be one of ${schema.enum.map((o) => JSON.stringify(o)).join(", ")}`);
  }
  if (actual === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) errors.push(`${where}: shorter than ${schema.minLength}`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) errors.push(`${where}: longer than ${schema.maxLength}`);
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) errors.push(`${where}: does not match ${schema.pattern}`);
  }
  if (actual === "integer" || actual === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${where}: below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${where}: above ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) errors.push(`${where}: must be above ${schema.exclusiveMinimum}`);
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) errors.push(`${where}: must be below ${schema.exclusiveMaximum}`);
  }
  if (actual === "array" && schema.items) value.forEach((item, i) => validate(item, schema.items, root, `${where}[${i}]`, errors));
  if (actual === "object") {
    const properties = schema.properties || {};
    (schema.required || []).forEach((name) => { if (!(name in value)) errors.push(`${path ? path + "." : ""}${name}: required`); });
    Object.entries(value).forEach(([name, item]) => {
      const child = path ? `${path}.${name}` : name;
      if (name in properties) validate(item, properties[name], root, child, errors);
      else if (schema.additionalProperties === false) errors.push(`${child}: not an argument of this tool`);
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object") validate(item, schema.additionalProperties, root, child, errors);
    });
  }
};

/**
 * galata's `test`, failing any test in whose pages a script threw and nobody caught
 * it (the browser's `pageerror`), from the first page load on: the listener sits on
 * the browser context, before galata opens JupyterLab in it.
 */
import { expect, test as galata } from "@jupyterlab/galata";

export const test = galata.extend({
  context: async ({ context }, use) => {
    const errors: string[] = [];
    context.on("weberror", (webError) => {
      const error = webError.error();
      errors.push(`${error.message}\n${error.stack ?? ""}`);
    });
    await use(context);
    expect(errors, "uncaught errors in the page").toEqual([]);
  },
});

export { expect };

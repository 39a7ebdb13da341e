import { h } from "./dom";
import { errorMessage } from "./pages/page";

/**
 * The one way a dashboard form is submitted: the browser's own submit is stopped, the fields are read
 * (a missing value is shown before anything is sent), the button is disabled while the request runs so
 * a double click sends once, and a failure is shown in the form's error line with the API's message.
 */

/** A value the user must fix: shown in the error line, with the field marked invalid and focused. */
export class FieldError extends Error {
  constructor(
    readonly field: HTMLElement,
    message: string,
  ) {
    super(message);
  }
}

/** The form's error line: empty until a submit fails; read out when it fills. */
export function formError(id?: string): HTMLElement {
  return h("div", { class: "form-error", role: "alert", ...(id === undefined ? {} : { id }) });
}

export interface FormSubmit<T> {
  /** Where a failure is shown (`formError`); without it, failures are the caller's to show. */
  error?: HTMLElement;
  /** The submit button: disabled while `send` runs, with `busyLabel` as its text meanwhile. */
  button?: HTMLButtonElement;
  busyLabel?: string;
  /** The input from the fields; throws (a FieldError names the field) when one needs fixing. */
  read: () => T;
  /** Sends the input; resolves once done. */
  send: (input: T) => void | Promise<void>;
  /** Told of a failed `send` before its message shows (to renew an idempotency key, say). */
  failed?: (err: unknown) => void;
  /** The field a failed `send` is about, if any: marked invalid and focused. */
  fieldOf?: (err: unknown) => HTMLElement | undefined;
}

function markInvalid(field: HTMLElement): void {
  field.setAttribute("aria-invalid", "true");
  field.focus();
}

/** Handles `form`'s submits as `submit` says: one at a time, failures shown in the form. */
export function onSubmit<T>(form: HTMLFormElement, submit: FormSubmit<T>): void {
  let busy = false;
  const show = (err: unknown) => {
    if (submit.error) submit.error.textContent = errorMessage(err);
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    submit.error?.replaceChildren();
    for (const field of form.querySelectorAll("[aria-invalid]")) field.removeAttribute("aria-invalid");
    let input: T;
    try {
      input = submit.read();
    } catch (err) {
      show(err);
      if (err instanceof FieldError) markInvalid(err.field);
      return;
    }
    const { button, busyLabel } = submit;
    const idleLabel = button?.textContent ?? "";
    busy = true;
    if (button) {
      button.disabled = true;
      if (busyLabel !== undefined) button.textContent = busyLabel;
    }
    try {
      await submit.send(input);
    } catch (err) {
      submit.failed?.(err);
      show(err);
      const field = submit.fieldOf?.(err);
      if (field) markInvalid(field);
    } finally {
      busy = false;
      if (button) {
        button.disabled = false;
        if (busyLabel !== undefined) button.textContent = idleLabel;
      }
    }
  });
}

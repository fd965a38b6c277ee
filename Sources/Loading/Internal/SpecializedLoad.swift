/// A composite's load as it was compiled where the composite was built, where its types are known and its code is
/// specialized.
///
/// A call through `any Loader<Output>` reaches a composite's `load(completion:)` in its generic form, which would
/// look up generic metadata at run time at every step of every load (three times the instructions of the same chain
/// at its concrete type, measured). That form hands the load to this closure instead: built by the composite's
/// inlinable initializer, it is specialized in the client like the rest of the chain. It captures nothing (the
/// composite is passed in), so it costs no allocation.
///
/// A composite's `load(completion:)` tells the two apart with `_isConcrete`, which is true in code specialized for
/// concrete types (a direct call, which runs the body itself) and false in the generic form.
@usableFromInline
struct SpecializedLoad<Composite: Loader>: Sendable {
    @usableFromInline
    let run: @Sendable (Composite, @escaping LoadCompletion<Composite.Output>) -> any CancellationToken

    @inlinable
    init(_ run: @escaping @Sendable (Composite, @escaping LoadCompletion<Composite.Output>) -> any CancellationToken) {
        self.run = run
    }
}

// z = x + y, with x donated to z (its buffer is reused) and y only read.
module @donate_add attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}", tf.aliasing_output = 0 : i32},
                         %y: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
      -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %z = stablehlo.add %x, %y : tensor<16x4xf32>
    return %z : tensor<16x4xf32>
  }
}
